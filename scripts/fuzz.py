"""Fuzz every file reader, the checkpoint loader and the export-folder loader with
hypothesis-generated inputs; count the inputs that end in anything but a result or a
UserError (a traceback for a user).

    python scripts/fuzz.py --n 10000 --json fuzz.json
    python scripts/fuzz.py --n 200 --only checkpoint

Readers get bytes built from near-valid pieces (SCAN/SIGMORPHON/COGS/TSV fragments,
tabs, newlines, NUL, invalid UTF-8), or a valid file of their format edited a few times,
written to a file. The checkpoint loader gets a small
valid generator checkpoint with its metadata edited (fields dropped, replaced by JSON or
text, sizes changed), tensors dropped, reshaped or added, or its bytes flipped and cut.
The export loader gets a small valid export folder with manifest fields edited and its
small files replaced (re-hashed, so the checks after the checksums are reached); a folder
that passes the checks is also cross-checked between its TorchScript and ONNX models.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from compgen.errors import UserError

PIECES = [b"IN: ", b" OUT: ", b"\t", b"\n", b"\r\n", b" ", b";", b"#", b"#x\ty\tlogprob\n",
          b"jump", b"I_JUMP", b"walk twice", b"V;PST", b"x _ 1", b"-1.5", b"\x00", b"\xff",
          b"\xc3", b"\xe2\x82", "é".encode(), "\u2028".encode(), b"1 2 3", b"{", b"}", b""]
file_bytes = st.one_of(
    st.binary(max_size=200),
    st.lists(st.one_of(st.sampled_from(PIECES), st.binary(max_size=4)), max_size=40).map(b"".join),
)
# a valid file per reader, edited a few times (pieces inserted, spans cut, bytes replaced):
# inputs near the valid ones reach the checks behind the first line's
VALID = {
    "data file (format guessed)": b"IN: jump twice OUT: I_JUMP I_JUMP\nIN: walk OUT: I_WALK\n",
    "samples TSV": b"jump twice\tI_JUMP I_JUMP\t-0.5\nwalk\tI_WALK\t-1.25\n",
    "SCAN file": b"IN: jump twice OUT: I_JUMP I_JUMP\nIN: walk left OUT: I_TURN_LEFT I_WALK\n",
    "SIGMORPHON file": b"walk\twalked\tV;PST\nrun\tran\tV;PST\nsee\twill see\tV;FUT\n",
    "COGS file": b"A cat ran .\tcat ( x _ 1 ) AND run . agent ( x _ 2 , x _ 1 )\tin_distribution\n"
                 b"Emma slept .\tsleep . agent ( x _ 1 , Emma )\tin_distribution\n",
    "LM corpus": b"the cat sat\na dog ran home\n",
    "vocab.json": b'{"tokens": ["<pad>", "<s>", "</s>", "<unk>", "<sep>", "<copy>", "jump"]}\n',
    "prototypes.txt": b"6 4 6 2\t6 2\n6 2\t6 4 6 2\n",
}


@st.composite
def edited(draw, valid: bytes) -> bytes:
    data = bytearray(valid)
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(data)))
        kind = draw(st.sampled_from(("insert", "cut", "replace")))
        if kind == "insert":
            data[at:at] = draw(st.one_of(st.sampled_from(PIECES), st.binary(max_size=3)))
        elif kind == "cut":
            del data[at:at + draw(st.integers(1, 6))]
        elif at < len(data):
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)


class Tally:
    def __init__(self, name: str):
        self.name, self.inputs, self.refused, self.accepted = name, 0, 0, 0
        self.tracebacks: list[str] = []

    def run(self, call) -> None:
        self.inputs += 1
        try:
            call()
            self.accepted += 1
        except UserError as exc:
            if not str(exc) or "\n" in str(exc).strip():
                self.tracebacks.append(f"UserError without a one-line message: {exc!r}")
            self.refused += 1
        except Exception:  # noqa: BLE001 (exactly what is counted)
            lines = traceback.format_exc().strip().splitlines()
            self.tracebacks.append(lines[-1])

    def figures(self) -> dict:
        return {"inputs": self.inputs, "refused_with_error": self.refused,
                "accepted": self.accepted, "tracebacks": len(self.tracebacks),
                "examples": sorted(set(self.tracebacks))[:5]}


def fuzz(strategy, body, n: int) -> None:
    @settings(max_examples=n, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(strategy)
    def case(value):
        body(value)

    case()


# ---------------------------------------------------------------- readers

def readers(work: Path) -> dict:
    from compgen.data import read_data_file
    from compgen.data.cogs import read_cogs_file
    from compgen.data.lm import read_corpus
    from compgen.data.scan import read_scan_file
    from compgen.data.sigmorphon import read_sigmorphon_file
    from compgen.data.vocab import Vocab
    from compgen.io import read_samples_tsv
    from compgen.runtimes.artifact import read_prototypes

    return {
        "data file (format guessed)": lambda p: read_data_file(p),
        "samples TSV": lambda p: read_samples_tsv(p),
        "SCAN file": lambda p: read_scan_file(p),
        "SIGMORPHON file": lambda p: read_sigmorphon_file(p),
        "COGS file": lambda p: read_cogs_file(p),
        "LM corpus": lambda p: read_corpus(p),
        "vocab.json": lambda p: Vocab.load(p),
        "prototypes.txt": lambda p: read_prototypes(p, 2),
    }


def fuzz_readers(n: int, work: Path) -> dict:
    out = {}
    for name, read in readers(work).items():
        tally = Tally(name)
        path = work / "input.txt"

        def body(data: bytes, read=read, tally=tally, path=path):
            path.write_bytes(data)
            tally.run(lambda: read(path))

        fuzz(st.one_of(file_bytes, edited(VALID[name])), body, n)
        out[name] = tally.figures()
    return out


# ---------------------------------------------------------------- checkpoints

def tiny_checkpoint(work: Path) -> Path:
    import torch

    from compgen.data import Vocab, load_dataset
    from compgen.training.checkpoint import build_recombine, load_preset, save_checkpoint

    config = load_preset("recombine_scan_cpu")
    config["data"] = "scan/jump"
    config["model"].update(hidden=16, embed=8, attdim=8)
    vocab = Vocab.from_table(load_dataset("scan/jump"))
    torch.manual_seed(0)
    model = build_recombine(config, len(vocab))
    optimizer = torch.optim.Adam(model.parameters())
    loss = sum(p.sum() for p in model.parameters())
    loss.backward()
    optimizer.step()
    path = work / "tiny.pt"
    save_checkpoint(path, model, config, vocab, "recombine", optimizer,
                    train_state={"step": 1, "epoch": 0, "batch": 1, "done": False, "curve": []})
    return path


checkpoint_edits = st.one_of(
    st.tuples(st.just("metadata"), st.sampled_from(["format", "kind", "config", "vocab",
                                                    "optim_groups", "train_state", "extra"]),
              st.one_of(st.none(), json_values.map(json.dumps), st.text(max_size=20))),
    st.tuples(st.just("model"), st.sampled_from(["hidden", "embed", "attdim", "nproto", "zdim",
                                                 "kpos", "variant", "copy", "vae", "unknown"]),
              st.one_of(st.none(), json_values, st.integers(-5, 10**12))),
    st.tuples(st.just("tensor"), st.integers(0, 200),
              st.one_of(st.none(), st.lists(st.integers(0, 5), max_size=3))),
    st.tuples(st.just("bytes"), st.integers(0, 10**6), st.binary(min_size=0, max_size=8)),
    st.tuples(st.just("cut"), st.integers(0, 10**6), st.just(None)),
)


def fuzz_checkpoints(n: int, work: Path) -> dict:
    import torch
    from safetensors.torch import load, save

    from compgen.training.checkpoint import load_checkpoint, load_generator

    source = tiny_checkpoint(work)
    raw = source.read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    metadata = dict(header["__metadata__"])
    tensors = load(raw)
    names = sorted(tensors)
    path = work / "edited.pt"
    tally = Tally("checkpoint loader")

    def body(edits):
        meta, stored = dict(metadata), dict(tensors)
        data = None
        for kind, key, value in edits:
            if kind == "metadata":
                meta.pop(key, None) if value is None else meta.__setitem__(key, value)
            elif kind == "model":
                config = json.loads(meta.get("config", "{}")) if meta.get("config", "").startswith("{") else {}
                if isinstance(config.get("model"), dict):
                    config["model"].pop(key, None) if value is None else config["model"].__setitem__(key, value)
                    meta["config"] = json.dumps(config)
            elif kind == "tensor":
                name = names[key % len(names)]
                if value is None:
                    stored.pop(name, None)
                else:
                    stored[name if key % 3 else f"model.added{key}"] = torch.zeros(value)
        blob = save(stored, metadata={k: str(v) for k, v in meta.items()})
        for kind, key, value in edits:
            if kind == "bytes":
                at = key % max(len(blob), 1)
                blob = blob[:at] + value + blob[at + len(value):]
            elif kind == "cut":
                blob = blob[: key % max(len(blob), 1)]
        data = blob
        path.write_bytes(data)

        def load_all():
            ckpt = load_checkpoint(path)
            if ckpt.kind == "recombine":
                load_generator(path)

        tally.run(load_all)

    fuzz(st.lists(checkpoint_edits, min_size=1, max_size=3), body, n)
    return {"checkpoint loader": tally.figures()}


# ---------------------------------------------------------------- export folders

manifest_edits = st.tuples(
    st.sampled_from(["format", "kind", "files", "model", "decoding", "config",
                     "model.vocab_size", "model.nproto", "model.hidden", "model.latent",
                     "model.vae", "model.variant", "decoding.max_len", "decoding.prototypes",
                     "config.model"]),
    st.one_of(st.none(), json_values, st.integers(-3, 10**10)))
file_edits = st.tuples(st.sampled_from(["vocab.json", "prototypes.txt", "vocab.txt",
                                        "model.ts", "encoder.onnx", "decoder_step.onnx",
                                        "extra.bin"]),
                       file_bytes)


def fuzz_exports(n: int, work: Path) -> dict:
    from compgen.export.kinds import export_checkpoint
    from compgen.runtimes.artifact import load_manifest, sha256
    from compgen.runtimes.backend_check import check_generator_backends

    source = work / "export"
    export_checkpoint(tiny_checkpoint(work), source, parity_sets=8, log=lambda m: None,
                      max_prototypes=64)
    manifest0 = json.loads((source / "manifest.json").read_text())
    folder = work / "edited-export"
    tally = Tally("export folder loader")
    originals = {p.name: p.read_bytes() for p in source.iterdir()}
    changed: set[str] = set()

    shutil.copytree(source, folder)

    def body(case):
        edits, files, rehash = case
        # put back what the previous case changed (cheaper than copying the folder)
        for path in folder.iterdir():
            if path.name not in originals:
                path.unlink()
            elif path.name in changed:
                path.write_bytes(originals[path.name])
        changed.clear()
        changed.update(name for name, _ in files)
        changed.add("manifest.json")
        manifest = json.loads(json.dumps(manifest0))
        for name, data in files:
            (folder / name).write_bytes(data)
            if rehash and isinstance(manifest.get("files"), dict):
                manifest["files"][name] = sha256(folder / name)
        for key, value in edits:
            section, _, field = key.partition(".")
            target = manifest if not field else manifest.get(section)
            if not isinstance(target, dict):
                continue
            name = field or section
            target.pop(name, None) if value is None else target.__setitem__(name, value)
        (folder / "manifest.json").write_text(json.dumps(manifest))

        def load_all():
            loaded = load_manifest(folder)
            if loaded.kind == "recombine":
                check_generator_backends(folder, loaded)

        tally.run(load_all)

    fuzz(st.tuples(st.lists(manifest_edits, max_size=2), st.lists(file_edits, max_size=2),
                   st.booleans()), body, n)
    return {"export folder loader": tally.figures()}


TARGETS = {"readers": fuzz_readers, "checkpoint": fuzz_checkpoints, "export": fuzz_exports}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000, help="inputs per reader/loader")
    parser.add_argument("--only", choices=sorted(TARGETS), action="append",
                        help="fuzz only these (repeatable)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    results, seconds = {}, {}
    with tempfile.TemporaryDirectory(prefix="compgen-fuzz-") as tmp:
        for name in args.only or list(TARGETS):
            start = time.perf_counter()
            results.update(TARGETS[name](args.n, Path(tmp)))
            seconds[name] = round(time.perf_counter() - start, 1)
    total = sum(r["tracebacks"] for r in results.values())
    for name, r in results.items():
        print(f"{name:28s} {r['inputs']:6d} inputs  {r['refused_with_error']:6d} refused  "
              f"{r['accepted']:6d} accepted  {r['tracebacks']} tracebacks")
        for example in r["examples"]:
            print(f"    {example}")
    print(f"total: {total} tracebacks ({seconds} s)")
    if args.json:
        args.json.write_text(json.dumps({"n": args.n, "targets": results, "seconds": seconds,
                                         "tracebacks": total}, indent=2))
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main())
