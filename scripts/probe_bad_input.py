"""Bad input of every kind through the real command line and the Python API: each probe
runs `compgen ...` (or a Python API call) in a subprocess and must end with exit status 2
and one `error: ...` line (or succeed where the input is fine), print no traceback, and
leave nothing behind: no staging files (`.NAME.*`), no partial outputs, nothing in its
private temp folder. The groups follow the classes of bad outcome: unverified loads
(`unverified`), commands destroying their input (`inputs`), silent wrong results
(`silent`, `api`), files that would not read back as written (`readback`), the bf16
compile path (`bf16`), crashes and leftovers.

    python scripts/probe_bad_input.py --json probes.json
    python scripts/probe_bad_input.py --only binary --only export
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"
BINARY = bytes(range(256)) * 20
LATIN1 = "IN: caf\u00e9 OUT: I_JUMP\n".encode("latin-1")
SCAN_LINES = b"IN: jump twice OUT: I_JUMP I_JUMP\nIN: walk OUT: I_WALK\n"


class Probe:
    def __init__(self, group: str, name: str, args: list, expect: str = "error",
                 message: str = "", outputs: tuple = (), setup=None, env=None, limit_as=None,
                 python: str | None = None, watch: tuple = (), check: str | None = None):
        self.group, self.name, self.args, self.expect = group, name, args, expect
        self.message, self.outputs, self.setup, self.env = message, outputs, setup, env or {}
        self.limit_as, self.python = limit_as, python
        self.watch = watch   # folders outside the work folder where nothing may be left
        self.check = check   # a Python API call that must then exit 0 (expect "ok")


# a Python API call as a probe: a UserError is the API's one error line; anything else
# raised is a traceback
API_CALL = ("import sys, compgen\nfrom compgen.errors import UserError\ntry:\n    {call}\n"
            "except UserError as exc:\n    print(f'error: {{exc}}', file=sys.stderr)\n"
            "    sys.exit(2)\n")


def compgen(args, cwd: Path, temp: Path, env: dict, limit_as=None, timeout=900, python=None):
    def limit():
        if limit_as:
            import resource

            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", "TMPDIR": str(temp),
                **env}
    command = (["-c", API_CALL.format(call=python)] if python is not None
               else ["-m", "compgen", *map(str, args)])
    return subprocess.run([sys.executable, *command], cwd=cwd,
                          env=full_env, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=limit, check=False)


# ONNX Runtime's import writes this one fixed-name file (a session id) into the temp folder
# and overwrites it on every run: it does not accumulate, and it is not compgen's to remove.
ONNXRUNTIME_SESSION_FILE = ".ses"


def snapshot(folder: Path) -> set:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")
            if p.name != ONNXRUNTIME_SESSION_FILE}


def run_probe(probe: Probe, fixtures: dict, base: Path) -> dict:
    work = base / f"{probe.group}-{probe.name}"
    temp = work / ".system-temp"
    temp.mkdir(parents=True)
    names = {**fixtures, "work": work}
    if probe.setup:
        probe.setup(work, names)
    args = [str(a).format(**names) for a in probe.args]
    python = None if probe.python is None else probe.python.format(**names)
    env = {key: value.format(**names) for key, value in probe.env.items()}
    before = snapshot(work)
    start = time.perf_counter()
    proc = compgen(args, work, temp, env, probe.limit_as, python=python)
    if python is not None:
        args = ["python:", python]
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    after = snapshot(work)
    allowed = {o.format(**names) for o in probe.outputs}
    new = {p for p in after - before
           if not p.startswith(".system-temp") and str(work / p) not in allowed
           and not any(str(work / p).startswith(a + "/") for a in allowed)}
    watched = [Path(folder.format(**names)) for folder in probe.watch]
    leftovers = sorted(new | {f".system-temp/{p}" for p in snapshot(temp)}
                       | {str(folder / p) for folder in watched if folder.is_dir()
                          for p in snapshot(folder)})
    traceback = "Traceback (most recent call last)" in proc.stderr
    if probe.expect == "error":
        ok = (proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ")
              and probe.message in lines[0])
    else:
        ok = proc.returncode == 0 and not traceback
        if ok and probe.check is not None:   # e.g. what the command wrote reads back
            checked = compgen([], work, temp, env, python=probe.check.format(**names))
            traceback = "Traceback (most recent call last)" in checked.stderr
            ok = checked.returncode == 0
            lines += [line for line in checked.stderr.splitlines() if line.strip()]
    return {"group": probe.group, "probe": probe.name, "command": " ".join(args),
            "exit": proc.returncode, "stderr": lines[-3:], "traceback": traceback,
            "left_behind": leftovers, "as_expected": ok and not leftovers,
            "seconds": round(time.perf_counter() - start, 1)}


# ---------------------------------------------------------------- fixtures

def make_fixtures(base: Path) -> dict:
    import torch

    from compgen.data import Vocab, load_dataset
    from compgen.models.seq2seq import Seq2Seq, Seq2SeqConfig
    from compgen.training.checkpoint import build_recombine, load_preset, save_checkpoint
    from compgen.training.predictor import conditional_pairs, save_predictor

    base.mkdir(parents=True, exist_ok=True)
    table = load_dataset("scan/jump")
    config = load_preset("recombine_scan_cpu")
    config["data"] = "scan/jump"
    config["model"].update(hidden=16, embed=8, attdim=8)
    vocab = Vocab.from_table(table)
    torch.manual_seed(0)
    model = build_recombine(config, len(vocab))
    save_checkpoint(base / "g.pt", model, config, vocab, "recombine",
                    torch.optim.Adam(model.parameters()),
                    train_state={"step": 1, "epoch": 0, "batch": 1, "done": False, "curve": []})
    pvocab = Vocab.build([t for x, y in conditional_pairs(table) for t in (x, y)])
    predictor = Seq2Seq(Seq2SeqConfig(vocab_size=len(pvocab), hidden=16, embed=8, max_len=45))
    save_predictor(base / "p.pt", predictor.eval(), pvocab, {"data": "scan/jump", "seed": 0})
    (base / "binary.bin").write_bytes(b"IN: jump OUT: I_JUMP\n" + BINARY)
    (base / "latin1.txt").write_bytes(LATIN1)
    (base / "scan.txt").write_bytes(SCAN_LINES)
    (base / "a-file").write_text("x\n")
    (base / "a-folder").mkdir(exist_ok=True)
    return {"g": base / "g.pt", "p": base / "p.pt", "bin": base / "binary.bin",
            "latin1": base / "latin1.txt", "scan": base / "scan.txt", "file": base / "a-file",
            "folder": base / "a-folder", "shipped": SHIPPED}


def checkpoint_edit(metadata=None, tensors=None):
    def setup(work: Path, names: dict):
        import torch
        from safetensors import safe_open
        from safetensors.torch import load_file, save_file

        with safe_open(str(names["g"]), "pt") as f:
            meta = dict(f.metadata())
        stored = load_file(str(names["g"]))
        for key, value in (metadata or {}).items():
            if value == "HUGE":
                value = {"hidden": 10**9}
            if isinstance(value, dict):   # values set in the config's [model] table
                config = json.loads(meta["config"])
                config["model"].update(value)
                value = json.dumps(config)
            meta.pop(key, None) if value is None else meta.__setitem__(key, value)
        for key, value in (tensors or {}).items():
            stored.pop(key, None) if value is None else stored.__setitem__(key, torch.zeros(value))
        save_file(stored, str(work / "bad.pt"), metadata=meta)
    return setup


def export_edit(manifest_edit=None, files=None, raw_manifest=None, reseal=True):
    def setup(work: Path, names: dict):
        from compgen.runtimes.artifact import sha256
        from compgen.runtimes.manifest_file import write_manifest_json

        folder = work / "export"
        shutil.copytree(SHIPPED, folder)
        manifest = json.loads((folder / "manifest.json").read_text())
        for name, content in (files or {}).items():
            data = content(folder) if callable(content) else content
            (folder / name).write_bytes(data)
            manifest["files"][name] = sha256(folder / name)
        if manifest_edit:
            manifest_edit(manifest)
        if raw_manifest is not None:
            (folder / "manifest.json").write_bytes(raw_manifest)
        elif reseal:   # the manifest's own checksum matches: only later checks can catch it
            write_manifest_json(folder, manifest)
        else:
            (folder / "manifest.json").write_text(json.dumps(manifest))
    return setup


def perturbed_model(folder: Path) -> bytes:
    import io

    import torch

    scripted = torch.jit.load(str(folder / "model.ts"))
    with torch.no_grad():
        for name, tensor in scripted.named_parameters():
            if name.endswith(("out.weight", "decoder.weight_hh")):
                tensor.mul_(-1.0)
    buffer = io.BytesIO()
    torch.jit.save(scripted, buffer)
    return buffer.getvalue()


def nan_kenlm_model(work: Path, names: dict) -> None:
    """``nan.bin``: a KenLM binary model whose <unk> probability is stored as NaN."""
    import struct

    from compgen.lm.kenlm_tools import find_kenlm_binaries, train_lm

    corpus = work / "corpus.txt"
    corpus.write_text("jump twice\nwalk left\njump left twice\nwalk\n")
    arpa = train_lm(corpus, work / "m.arpa", order=2, discount_fallback=True)
    subprocess.run([str(find_kenlm_binaries()[1]), str(arpa), str(work / "m.bin")],
                   capture_output=True, check=True)
    unk = next(float(line.split("\t")[0]) for line in arpa.read_text().splitlines()
               if line.split("\t")[1:2] == ["<unk>"])
    data = (work / "m.bin").read_bytes()
    (work / "nan.bin").write_bytes(data.replace(struct.pack("<f", unk),
                                                struct.pack("<f", float("nan"))))


def write(name: str, content: bytes):
    def setup(work: Path, names: dict):
        (work / name).write_bytes(content)
    return setup


# ---------------------------------------------------------------- the probes

def probes() -> list[Probe]:
    out: list[Probe] = []
    # 1. binary and non-UTF-8 input in every text reader
    readers = {
        "data-stats": ["data", "stats", "{bad}"],
        "geca": ["augment", "geca", "{bad}", "-o", "{work}/out.tsv"],
        "lm-train": ["lm", "train", "{bad}", "-o", "{work}/m.arpa", "--discount_fallback"],
        "train-augment": ["train", "predictor", "--data", "scan/jump", "--augment", "{bad}",
                          "-o", "{work}/p.pt"],
        "train-data": ["train", "predictor", "--data", "{bad}", "-o", "{work}/p.pt"],
        "predict-input": ["predict", "{p}", "-i", "{bad}"],
        "evaluate-data": ["evaluate", "{p}", "--data", "{bad}"],
        "lm-eval-val": ["lm", "eval", "--base", "{bad}", "--val", "{bad}", "--test", "{bad}"],
        "lm-eval-model": ["lm", "eval", "--base", "{bad}", "--val", "lm/kin", "--test", "lm/kin"],
        "inspect": ["inspect", "{bad}"],
        "export-ckpt": ["export", "{bad}", "-o", "{work}/exp"],
        "sample-ckpt": ["sample", "{bad}", "--n", "2"],
    }
    for content in ("bin", "latin1"):
        for name, args in readers.items():
            out.append(Probe("binary", f"{name}-{content}",
                             [a.replace("{bad}", "{" + content + "}") for a in args]))
    for name, edit in {"manifest": {"raw_manifest": BINARY},
                       "prototypes": {"files": {"prototypes.txt": BINARY}},
                       "vocab": {"files": {"vocab.json": LATIN1}}}.items():
        out.append(Probe("binary", f"export-{name}", ["sample", "{work}/export", "--n", "2"],
                         setup=export_edit(**edit)))

    # 2. inconsistent checkpoint metadata, in every command that loads a checkpoint
    edits = {"no-kind": {"metadata": {"kind": None}},
             "config-json": {"metadata": {"config": "{not json"}},
             "config-list": {"metadata": {"config": "[1]"}},
             "no-model": {"metadata": {"config": '{"data": "scan/jump"}'}},
             "vocab": {"metadata": {"vocab": '{"tokens": 3}'}},
             "state-json": {"metadata": {"train_state": "nan]"}},
             "groups": {"metadata": {"optim_groups": "{}"}},
             "hidden-1e9": {"metadata": {"config": "HUGE"}},
             "max-len-negative": {"metadata": {"config": {"max_len": -1}}},
             "dropout-2": {"metadata": {"config": {"pdrop": 2.0}}},
             "shape": {"tensors": {"model.decoder.weight_ih": [2, 2]}},
             "junk-tensor": {"tensors": {"junk.x": [2]}},
             "missing-weight": {"tensors": {"model.out.weight": None}}}
    commands = {"sample": ["sample", "{work}/bad.pt", "--n", "2", "-o", "{work}/s.tsv"],
                "export": ["export", "{work}/bad.pt", "--no-cpp", "-o", "{work}/exp"],
                "resume": ["train", "generator", "--resume", "--max-steps", "2", "-o",
                           "{work}/bad.pt"]}
    for edit_name, edit in edits.items():
        for command, args in commands.items():
            out.append(Probe("checkpoint", f"{command}-{edit_name}", args, message="bad.pt",
                             setup=checkpoint_edit(**edit)))
    out.append(Probe("checkpoint", "evaluate-no-kind", ["evaluate", "{work}/bad.pt"],
                     setup=checkpoint_edit(metadata={"kind": None})))
    out.append(Probe("checkpoint", "inspect-shape", ["inspect", "{work}/bad.pt"],
                     setup=checkpoint_edit(tensors={"model.decoder.weight_ih": [2, 2]})))

    # 3. export folders verified on load
    folder_edits = {
        "no-files": {"manifest_edit": lambda m: m.pop("files")},
        "empty-files": {"manifest_edit": lambda m: m.update(files={})},
        "max-len-1e9": {"manifest_edit": lambda m: m["decoding"].update(max_len=10**9)},
        "vocab-size-text": {"manifest_edit": lambda m: m["model"].update(vocab_size="25")},
        "no-latent": {"manifest_edit": lambda m: m["model"].pop("latent")},
        "binary-model": {"files": {"model.ts": BINARY}},
        "foreign-model": {"files": {"model.ts": perturbed_model}},
        "foreign-step-graph": {"files": {"decoder_step.onnx":
                                          lambda f: (f / "encoder.onnx").read_bytes()}},
        "binary-encoder": {"files": {"encoder.onnx": BINARY}},
        "prototype-ids": {"files": {"prototypes.txt": b"1 2 999\t3 4\n"}},
        "corrupt-unhashed": {"manifest_edit": lambda m: m["files"].update(
            {"model.ts": "0" * 64})},
    }
    for name, edit in folder_edits.items():
        out.append(Probe("export", name, ["sample", "{work}/export", "--n", "2", "-o",
                                          "{work}/s.tsv"], setup=export_edit(**edit)))
    out.append(Probe("export", "unlisted-file", ["sample", "{work}/export", "--n", "2"],
                     setup=lambda w, n: (export_edit()(w, n),
                                         (w / "export" / "stray.bin").write_bytes(b"x"))))

    # 4. outputs checked before the work
    targets = {"folder": "{folder}", "under-a-file": "{file}/out", "proc": "/proc/out"}
    writers = {"train-generator": ["train", "generator", "--data", "scan/jump", "--max-steps",
                                   "1", "-o"],
               "sample": ["sample", "{shipped}", "--n", "2", "-o"],
               "geca": ["augment", "geca", "scan/jump", "--n-sample", "5", "-o"],
               "lm-train": ["lm", "train", "lm/kin", "--discount_fallback", "-o"]}
    for writer, args in writers.items():
        for target, path in targets.items():
            out.append(Probe("outputs", f"{writer}-{target}", [*args, path]))
    out.append(Probe("outputs", "export-onto-a-file", ["export", "{g}", "-o", "{file}"]))
    out.append(Probe("outputs", "predict-folder", ["predict", "{p}", "-i", "{scan}", "-o",
                                                   "{folder}"]))
    out.append(Probe("outputs", "evaluate-proc", ["evaluate", "{p}", "-o", "/proc/r.csv"]))

    # 5. samples TSV rows and format guessing
    out.append(Probe("tsv", "ragged-stats", ["data", "stats", "{work}/s.txt"], message="s.txt:2:",
                     setup=write("s.txt", b"a\tb\nc\td\tV;PST\n")))
    out.append(Probe("tsv", "ragged-augment", ["train", "predictor", "--data", "scan/jump",
                                               "--augment", "{work}/s.txt", "-o", "{work}/p.pt"],
                     message="s.txt:2:", setup=write("s.txt", b"jump\tI_JUMP\nwalk\n")))
    out.append(Probe("tsv", "score-not-number", ["data", "stats", "{work}/s.txt"],
                     message="s.txt:3:",
                     setup=write("s.txt", b"#x\ty\tlogprob\njump\tI_JUMP\t-1\nwalk\tI_WALK\tlow\n")))

    # 6. --resume without its checkpoint; evaluate --data FILE; lm train on binary
    out.append(Probe("resume", "generator", ["train", "generator", "--data", "scan/jump",
                                             "--resume", "--max-steps", "1", "-o",
                                             "{work}/none.pt"]))
    out.append(Probe("resume", "predictor", ["train", "predictor", "--data", "scan/jump",
                                             "--resume", "-o", "{work}/none.pt"]))
    out.append(Probe("evaluate", "data-file", ["evaluate", "{p}", "--data", "{scan}", "-o",
                                               "{work}/r.csv"], expect="ok",
                     outputs=("{work}/r.csv", "{work}/r.summary.csv", "{work}/r.md")))

    # 7. memory: a failed allocation is one line with its size
    out.append(Probe("memory", "huge-hidden", ["train", "generator", "--data", "scan/jump",
                                               "--hidden", "300000", "--max-steps", "1", "-o",
                                               "{work}/g.pt"], message="an allocation of",
                     limit_as=6 << 30))

    # 8. silent wrong results made errors: option ranges, corrupt models, impossible work
    for name, option in {"temperature-nan": ["-T", "nan"], "temperature-inf": ["-T", "inf"],
                         "temperature-subnormal": ["-T", "1e-320"],
                         "seed-2^70": ["--seed", str(2**70)], "seed-2^63": ["--seed", str(2**63)]
                         }.items():
        out.append(Probe("options", name, ["sample", "{shipped}", "--n", "2", "--strategy",
                                           "temperature", *option, "-o", "{work}/s.tsv"],
                         message=option[0].replace("-T", "--temperature")))
    out.append(Probe("options", "train-seed-2^70", ["train", "generator", "--data", "scan/jump",
                                                    "--max-steps", "1", "--seed", str(2**70),
                                                    "-o", "{work}/g.pt"], message="--seed"))
    out.append(Probe("lm", "nan-model-eval", ["lm", "eval", "--base", "{work}/nan.bin", "--val",
                                              "{work}/corpus.txt", "--test", "{work}/corpus.txt"],
                     message="non-finite", setup=nan_kenlm_model))
    out.append(Probe("lm", "nan-model-rerank", ["sample", "{shipped}", "--n", "2", "--lm",
                                                "{work}/nan.bin", "--rerank", "lm", "-o",
                                                "{work}/s.tsv"],
                     message="non-finite", setup=nan_kenlm_model))
    out.append(Probe("lm", "order-beyond-build", ["lm", "train", "lm/kin", "--order", "7", "-o",
                                                  "{work}/m.arpa"], message="--order 7"))
    out.append(Probe("errors", "csl-nonterminal-grammar",
                     ["augment", "csl", "scan/jump", "--grammar", "{work}/nt.grammar",
                      "--uniform", "--n", "5", "-o", "{work}/c.tsv"], message="no derivation",
                     setup=write("nt.grammar", b"NT_1 and NT_2 ### NT_1 NT_2\n")))
    out.append(Probe("errors", "ray-unknown-host", ["sample", "{shipped}", "--n", "2", "--ray",
                                                    "nohost.invalid:6379"],
                     message="unknown host"))

    # 9. leaks: the C++ backend and successful runs leave only their outputs
    out.append(Probe("leaks", "cpp-sample", ["sample", "{shipped}", "--backend", "cpp", "--n",
                                             "5", "-o", "{work}/s.tsv"], expect="ok",
                     outputs=("{work}/s.tsv",)))
    out.append(Probe("leaks", "onnx-sample", ["sample", "{shipped}", "--n", "5", "-o",
                                              "{work}/s.tsv"], expect="ok",
                     outputs=("{work}/s.tsv",)))
    return out + trust_probes() + numeric_probes()


# ---------------------------------------------------------------- numeric edges

def nonfinite_checkpoint(prefix: str, value: float):
    """``bad.pt``: the fixture generator with its first ``prefix`` tensor set to ``value``."""
    def setup(work: Path, names: dict):
        from safetensors import safe_open
        from safetensors.torch import load_file, save_file

        with safe_open(str(names["g"]), "pt") as handle:
            metadata = dict(handle.metadata())
        tensors = load_file(str(names["g"]))
        tensors[min(k for k in tensors if k.startswith(prefix))].view(-1)[0] = value
        save_file(tensors, str(work / "bad.pt"), metadata=metadata)
    return setup


def numeric_probes() -> list[Probe]:
    out: list[Probe] = []
    nan_weights = nonfinite_checkpoint("model.", float("nan"))
    out.append(Probe("numeric", "resume-nan-weights",
                     ["train", "generator", "--resume", "--epochs", "2", "-o", "{work}/bad.pt"],
                     message="bad.pt: tensor model.", setup=nan_weights))
    out.append(Probe("numeric", "resume-inf-weights",
                     ["train", "generator", "--resume", "--epochs", "2", "-o", "{work}/bad.pt"],
                     message="bad.pt: tensor model.out",
                     setup=nonfinite_checkpoint("model.out", float("inf"))))
    out.append(Probe("numeric", "export-nan-weights", ["export", "{work}/bad.pt", "-o",
                                                       "{work}/exp"],
                     message="bad.pt: tensor model.", setup=nan_weights))
    out.append(Probe("numeric", "sample-nan-weights", ["sample", "{work}/bad.pt", "--n", "3",
                                                       "-o", "{work}/s.tsv"],
                     message="bad.pt: tensor model.", setup=nan_weights))
    out.append(Probe("numeric", "export-ok-no-temp-cache", ["export", "{g}", "--no-cpp", "-o",
                                                            "{work}/exp"],
                     expect="ok", outputs=("{work}/exp",)))
    train = ["train", "generator", "--data", "{work}/d.tsv", "-o", "{work}/g.pt"]
    for option, value in (("--time-budget", "nan"), ("--time-budget", "-1"), ("--lr", "nan"),
                          ("--lr", "-1"), ("--max-steps", "-5"), ("--hidden", str(10**20)),
                          ("--nproto", "3"), ("--batch-size", "0")):
        out.append(Probe("numeric", f"generator{option}={value}", [*train, option, value],
                         message=option, setup=with_files(**{"d.tsv": PAIRS})))
    out.append(Probe("numeric", "generator-diverges", [*train, "--hidden", "16", "--epochs",
                                                       "3", "--lr", "1e30", "--quiet"],
                     message="training diverged", outputs=("{work}/g.pt", "{work}/g.pt.loss.csv"),
                     setup=with_files(**{"d.tsv": PAIRS + b"walk twice\tWALK WALK\nrun\tRUN\n"
                                                  b"run twice\tRUN RUN\n"})))
    for option, value in (("--p-aug", "nan"), ("--max-len", "-1"), ("--keep-every", "-1")):
        out.append(Probe("numeric", f"predictor{option}={value}",
                         ["train", "predictor", "--data", "{work}/d.tsv", option, value, "-o",
                          "{work}/p.pt"], message=option, setup=with_files(**{"d.tsv": PAIRS})))
    out.append(Probe("numeric", "predictor-seed--1",
                     ["train", "predictor", "--data", "{work}/d.tsv", "--seed", "-1", "--epochs",
                      "1", "--hidden", "16", "-o", "{work}/p.pt"], expect="ok",
                     outputs=("{work}/p.pt", "{work}/p.pt.curve.csv"),
                     setup=with_files(**{"d.tsv": PAIRS})))
    out.append(Probe("numeric", "api-max-steps--5", [], python=(
        "compgen.train_generator('{work}/d.tsv', '{work}/g.pt', max_steps=-5)"),
        message="max_steps -5", setup=with_files(**{"d.tsv": PAIRS})))
    out.append(Probe("numeric", "api-p-aug-nan", [], python=(
        "compgen.train_predictor('{work}/d.tsv', '{work}/p.pt', p_aug=float('nan'))"),
        message="p_aug nan", setup=with_files(**{"d.tsv": PAIRS})))
    for backend in ("cpp", "onnx"):
        for option, value in (("--beam-width", "1000000"), ("--threads", "1000000"),
                              ("--n", str(2**70)), ("--batch-size", "100000000")):
            out.append(Probe("numeric", f"sample-{backend}{option}={value}",
                             ["sample", "{shipped}", "--backend", backend, "--strategy", "beam",
                              "--n", "2", option, value, "-o", "{work}/s.tsv"],
                             message=f"{option} {value}"))
    # a device named as a file exists: "no such file" or "out of memory" misled
    devices = {"predict-input": ["predict", "{p}", "-i", "/dev/zero"],
               "train-augment": ["train", "predictor", "--data", "scan/jump", "--augment",
                                 "/dev/zero", "-o", "{work}/p.pt"],
               "lm-eval-base": ["lm", "eval", "--base", "/dev/zero", "--val", "lm/kin",
                                "--test", "lm/kin"],
               "lm-train": ["lm", "train", "/dev/zero", "-o", "{work}/m.arpa"],
               "sample-lm": ["sample", "{shipped}", "--n", "2", "--lm", "/dev/zero", "-o",
                             "{work}/s.tsv"],
               "export": ["export", "/dev/zero", "-o", "{work}/exp"],
               "stem-corrupt": ["augment", "stem-corrupt", "/dev/zero", "-o", "{work}/c.tsv"]}
    for name, args in devices.items():
        out.append(Probe("numeric", f"dev-zero-{name}", args,
                         message="/dev/zero: not a regular file"))
    # a bad id in a length cut's own tuple file is named by that file and line
    for backend in ("onnx", "cpp"):
        out.append(Probe("numeric", f"cut-file-bad-id-{backend}",
                         ["sample", "{work}/export", "--backend", backend, "--prototype-cut",
                          "none", "--n", "2", "-o", "{work}/s.tsv"],
                         message="prototypes.none.txt:2: token id 999", setup=cut_file_bad_id))
    return out


def cut_file_bad_id(work: Path, names: dict) -> None:
    """``export/``: the fixture generator exported, line 2 of its ``none`` cut's tuple file
    holding id 999, the manifest resealed."""
    from compgen.runtimes.artifact import sha256
    from compgen.runtimes.manifest_file import write_manifest_json

    subprocess.run([sys.executable, "-m", "compgen", "export", str(names["g"]), "--no-cpp",
                    "-o", str(work / "export")], cwd=ROOT, capture_output=True, check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(work / ".system-temp")})
    folder = work / "export"
    manifest = json.loads((folder / "manifest.json").read_text())
    cut = manifest["decoding"]["prototype_cuts"]["none"]["file"]
    lines = (folder / cut).read_text().splitlines()
    lines[1] = "999" + lines[1][lines[1].index(" "):]
    (folder / cut).write_text("\n".join(lines) + "\n")
    manifest["files"][cut] = sha256(folder / cut)
    write_manifest_json(folder, manifest)


# ---------------------------------------------------------------- round 4: trust

PAIRS = b"jump\tJUMP\nwalk\tWALK\njump twice\tJUMP JUMP\n"
BF16_CPU = b"processor : 0\nflags : fpu sse4_2 avx avx2 fma avx512f avx512_bf16 amx_bf16\n"


def cached_kenlm_without_record(work: Path, names: dict) -> None:
    """KenLM's binaries copied where scripts/install_kenlm.sh puts them, with no record."""
    from compgen.lm.kenlm_tools import find_kenlm_binaries, kenlm_version

    folder = work / "xdg" / "compgen" / "kenlm" / kenlm_version() / "bin"
    folder.mkdir(parents=True)
    for tool in find_kenlm_binaries():
        shutil.copy2(tool, folder / tool.name)
    (work / "c.txt").write_bytes(b"a b c\nb c d\na c d\n")


def edited_named_corpus(work: Path, names: dict) -> None:
    """A data folder whose lm/kin/train.txt has one sentence more than compgen ships."""
    from compgen.data.sources import embedded_text

    folder = work / "data" / "lm" / "kin"
    folder.mkdir(parents=True)
    for split in ("train", "val", "test"):
        text = embedded_text(f"kin_{split}.txt", f"lm/kin/{split}.txt")
        (folder / f"{split}.txt").write_text(text, encoding="utf-8")
    with open(work / "data" / "lm" / "kin" / "train.txt", "a", encoding="utf-8") as out:
        out.write("a planted sentence\n")
    # as `compgen data fetch` lists what it wrote (only those files are held to the sums)
    (work / "data" / "FETCHED").write_text("lm/kin/train.txt\nlm/kin/val.txt\nlm/kin/test.txt\n")


def flipped_kenlm_model(suffix: str):
    """``m.SUFFIX`` as `compgen lm train` writes it (with ``m.SUFFIX.sha256``), then one bit
    flipped: a byte in the middle of a binary, a digit of a probability in an ARPA file."""
    def setup(work: Path, names: dict) -> None:
        from compgen.lm.kenlm_tools import train_lm

        words = ["I_JUMP", "I_WALK", "I_LOOK", "I_RUN", "I_TURN_LEFT", "I_TURN_RIGHT"]
        lines = [" ".join(words[(i * k) % len(words)] for k in range(1, 2 + i % 5))
                 for i in range(60)]
        (work / "c.txt").write_text("\n".join(lines) + "\n")
        model = train_lm(work / "c.txt", work / f"m.{suffix}", order=3, discount_fallback=True)
        data = bytearray(model.read_bytes())
        at = len(data) // 2
        if suffix == "arpa":
            at = next(i for i in range(at, len(data)) if chr(data[i]).isdigit())
        data[at] ^= 1
        model.write_bytes(bytes(data))
    return setup


def with_files(**files: bytes):
    def setup(work: Path, names: dict):
        for name, content in files.items():
            (work / name).write_bytes(content)
    return setup


def cuda_is_absent() -> bool:
    import torch

    return not torch.cuda.is_available()


# record files whose table would not say what the file says (compgen.data.record_checks)
READER_CASES = {
    "list-then-text.jsonl": (b'{"x": ["a", "b"], "y": "c"}\n{"x": "d e", "y": "f"}\n', ":2:"),
    "number-after-text.jsonl": (b'{"x": "a", "y": "c"}\n{"x": 5, "y": "f"}\n', ":2:"),
    "null-token.jsonl": (b'{"x": ["a", null], "y": "c"}\n', ":1:"),
    "repeated-key.jsonl": (b'{"x": "a", "x": "b", "y": "c"}\n', ":1:"),
    "repeated-column.csv": (b"input,input,output\na,b,c\n", ":1:"),
    "quoted-empty.csv": (b'input,output\na,b\n"",x\n', ":3:"),
    "quoted-newline.csv": (b'input,output\n"a\nb",x\nc,\n', ":4:"),
}


def reader_probes() -> list[Probe]:
    """Tokens a samples TSV would not read back as written (refused where GECA reads them),
    and record files whose table would differ from the file."""
    out: list[Probe] = []
    for name, token in (("tab", "a\tb"), ("newline", "a\nb"), ("u001f", "a\x1fb"),
                        ("nul", "a\x00b"), ("space", "a b"), ("u2581", "a\u2581b")):
        rows = json.dumps({"x": ["walk"], "y": ["W"]}) + "\n" + json.dumps(
            {"x": ["jump", token], "y": ["J"]}) + "\n"
        out.append(Probe("silent", f"token-read-back-{name}",
                         ["augment", "geca", "{work}/d.jsonl", "-o", "{work}/g.tsv"],
                         message="d.jsonl:2:", setup=with_files(**{"d.jsonl": rows.encode()})))
    for name, (text, line) in READER_CASES.items():
        out.append(Probe("silent", f"reader-{name}", ["data", "stats", f"{{work}}/{name}"],
                         message=name + line, setup=with_files(**{name: text})))
    return out


# first rows of a GECA output (--concat: the training rows first) that a header-less
# x<TAB>y file would read as something else: SCAN, a header line, a BOM
FIRST_ROWS = {"scan": ("IN: jump", "J"), "scan-line": ("IN: walk OUT: I_WALK", "Q"),
              "x-y": ("x", "y"), "input-output": ("Input", "Output"), "names": ("run", "R"),
              "bom": ("\ufeffrun", "R")}
READ_BACK = ("import sys; from compgen.data.files import Fields, read_pairs_file; "
             "a = compgen.load('{work}/d.jsonl').select('x', 'y').rows(); "
             "b = compgen.load('{work}/g.tsv').select('x', 'y').rows(); "
             "c = [tuple(r) for r in read_pairs_file('{work}/g.tsv', 'augment', Fields())]; "
             "sys.exit(0 if b[:len(a)] == a and c == b else "
             "'g.tsv reads back as %r, not %r' % (b[:1], a[:1]))")
# rows after blank lines (and a quoted newline) must be named by their own line
LINE_CASES = {
    "blank-lines.tsv": (b"x\ty\n\njump\tJ\n\n\nwalk\t \nrun\tR\n", ":6:"),
    "blank-lines.jsonl": (b'{"x": "jump", "y": "J"}\n\n\n{"x": "walk", "y": ""}\n', ":4:"),
    "blank-quoted.csv": (b'x,y\n"jump\ntwice",J J\n\nrun,R\nwalk,""\n', ":6:"),
}


def read_back_probes() -> list[Probe]:
    """What compgen writes reads back as written, whatever its first row looks like; a
    row that could not is refused with nothing written; error lines name the true line."""
    rest = [("jump twice", "J J"), ("walk twice", "W W"), ("jump left", "L J"),
            ("walk left", "L W"), ("look twice", "K K")]   # GECA synthesizes "look left"

    def data(first):
        rows = [first, *rest]
        return "".join(json.dumps({"x": x, "y": y}) + "\n" for x, y in rows).encode()
    geca = ["augment", "geca", "{work}/d.jsonl", "--preset", "generic", "--concat", "-o",
            "{work}/g.tsv"]
    out = [Probe("readback", f"geca-first-row-{name}", geca, expect="ok", check=READ_BACK,
                 outputs=("{work}/g.tsv",), setup=with_files(**{"d.jsonl": data(first)}))
           for name, first in FIRST_ROWS.items()]
    out.append(Probe("readback", "geca-row-a-comment", geca, message="'#walk' of row 1",
                     setup=with_files(**{"d.jsonl": data(("#walk twice", "W W"))})))
    # a STEM-CORRUPT pool named .tsv: SIGMORPHON triples, not COGS (sentence, form, type)
    gold = "".join(f"{stem}ar\t{stem}o\tV;IND;PRS;1;SG\n{stem}ar\t{stem}aste\tV;IND;PST;2;SG\n"
                   for stem in ("habl", "cant", "camin", "mir", "estudi", "trabaj"))
    out.append(Probe("readback", "stem-corrupt-pool-tsv",
                     ["augment", "stem-corrupt", "{work}/gold.txt", "--pool", "20",
                      "--iterations", "2", "-o", "{work}/pool.tsv"], expect="ok",
                     outputs=("{work}/pool.tsv",), setup=with_files(**{"gold.txt": gold.encode()}),
                     check="import sys; from compgen.augment.stem_corrupt.corrupt import "
                           "read_triples; t = compgen.load('{work}/pool.tsv'); sys.exit(0 if "
                           "'tags' in t.columns and t.height == len(read_triples("
                           "'{work}/pool.tsv')) else 'pool.tsv read as %r' % (t.columns,))"))
    # a samples TSV of pairs read as a corpus: its header and both sides as sentences
    out.append(Probe("readback", "lm-train-samples-tsv",
                     ["lm", "train", "{work}/s.tsv", "-o", "{work}/m.arpa"], message="--side",
                     setup=with_files(**{"s.tsv": b"#x\ty\njump twice\tJ J\nwalk\tW\n"})))
    # a DataFrame the Python API saves beside a checkpoint (train_predictor): a space token
    # survives
    spaced = json.dumps({"x": ["a", " ", "b", "PST"], "y": ["a", " ", "b"]}) + "\n"
    out.append(Probe("readback", "api-dataframe-space-token", [], expect="ok",
                     outputs=("{work}/m.pt.data",),
                     setup=with_files(**{"d.jsonl": spaced.encode()}),
                     python="import sys, pathlib; from compgen.api import _saved_beside; "
                            "t = compgen.load('{work}/d.jsonl'); cm = _saved_beside("
                            "t, pathlib.Path('{work}/m.pt')); saved = cm.__enter__(); "
                            "b = compgen.load(saved.name); "
                            "sys.exit(0 if b.select('x', 'y').rows() == t.select('x', 'y')"
                            ".rows() else 'read back as %r' % (b.row(0),))"))
    for name, (text, line) in LINE_CASES.items():
        out.append(Probe("readback", f"line-{name}", ["data", "stats", f"{{work}}/{name}"],
                         message=name + line, setup=with_files(**{name: text})))
    return out


def trust_probes() -> list[Probe]:
    out: list[Probe] = reader_probes() + read_back_probes()
    # unverified loads: nothing from a cache, a data folder or an edited manifest is used
    out.append(Probe("unverified", "manifest-redirected", ["sample", "{work}/export", "--n",
                                                           "2", "-o", "{work}/s.tsv"],
                     message="does not match its own checksum", setup=export_edit(
                         manifest_edit=lambda m: m["decoding"].update(prototype_file="train.tsv"),
                         reseal=False)))
    out.append(Probe("unverified", "kenlm-without-record",
                     ["lm", "train", "{work}/c.txt", "-o", "{work}/m.arpa",
                      "--discount_fallback"], message="digest record",
                     setup=cached_kenlm_without_record,
                     env={"XDG_CACHE_HOME": "{work}/xdg", "COMPGEN_LMPLZ": "",
                          "PATH": os.path.dirname(sys.executable)}))
    out.append(Probe("unverified", "named-corpus-edited",
                     ["lm", "train", "lm/kin", "--data-dir", "{work}/data", "-o",
                      "{work}/m.arpa"], message="does not match the sha256",
                     setup=edited_named_corpus))
    for suffix in ("bin", "arpa"):   # a bit flipped in a model lm train wrote
        model = f"{{work}}/m.{suffix}"
        for name, args in (("eval", ["lm", "eval", "--base", model, "--val", "{work}/c.txt",
                                     "--test", "{work}/c.txt"]),
                           ("sample", ["sample", "{shipped}", "--n", "2", "--lm", model, "-o",
                                       "{work}/s.tsv"]),
                           ("rerank-cpp", ["sample", "{shipped}", "--n", "2", "--lm", model,
                                           "--rerank", "lm", "--backend", "cpp", "-o",
                                           "{work}/s.tsv"])):
            out.append(Probe("unverified", f"kenlm-flipped-{suffix}-{name}", args,
                             message="does not match its digest record",
                             setup=flipped_kenlm_model(suffix)))
    # a command destroys its input: refused before any work
    same = {"geca": ["augment", "geca", "{work}/d.tsv", "-o", "{work}/d.tsv"],
            "geca-link": ["augment", "geca", "{work}/d.tsv", "-o", "{work}/link.tsv"],
            "lm-train": ["lm", "train", "{work}/c.txt", "-o", "{work}/c.txt"],
            "train-augment": ["train", "predictor", "--data", "{work}/d.tsv", "--augment",
                              "{work}/a.tsv", "-o", "{work}/a.tsv"],
            "sample-lm": ["sample", "{shipped}", "--n", "2", "--lm", "{work}/c.txt", "-o",
                          "{work}/c.txt"],
            "stem-corrupt": ["augment", "stem-corrupt", "{work}/d.tsv", "-o", "{work}/d.tsv"]}

    def inputs(work: Path, names: dict) -> None:
        with_files(**{"d.tsv": PAIRS, "a.tsv": PAIRS, "c.txt": b"a b c\n"})(work, names)
        (work / "link.tsv").symlink_to(work / "d.tsv")
    for name, args in same.items():
        out.append(Probe("inputs", name, args, message="is also an input", setup=inputs))
    out.append(Probe("inputs", "sample-into-export", ["sample", "{work}/export", "--n", "2",
                                                      "-o", "{work}/export/train.tsv"],
                     message="inside the export folder", setup=export_edit()))
    out.append(Probe("inputs", "export-over-itself", ["export", "{work}/export", "-o",
                                                      "{work}/export"],
                     message="is also an input", setup=export_edit()))
    # the bf16 compile path, run as on a CPU with bf16 units: a failed compile leaves nothing
    out.append(Probe("bf16", "compile-without-compiler",
                     ["sample", "{shipped}", "--backend", "torch", "--precision", "bf16", "--n",
                      "3", "-o", "{work}/s.tsv"], message="TorchInductor, which failed",
                     setup=with_files(cpuinfo=BF16_CPU), watch=("{work}.cache/compgen/reduced",),
                     env={"COMPGEN_CPUINFO": "{work}/cpuinfo", "CXX": "{work}/no-cxx",
                          "XDG_CACHE_HOME": "{work}.cache"}))
    # silent wrong results made errors
    if cuda_is_absent():
        out.append(Probe("silent", "device-cuda-env", ["sample", "{shipped}", "--n", "2", "-o",
                                                       "{work}/s.tsv"],
                         message="COMPGEN_DEVICE cuda", env={"COMPGEN_DEVICE": "cuda"}))
    for token in ("<sep>", "<pad>", "<copy>", "<unk>"):
        out.append(Probe("silent", f"data-word-{token.strip('<>')}",
                         ["data", "stats", "{work}/d.tsv"], message="d.tsv:2:",
                         setup=with_files(**{"d.tsv": f"1 2\tone two\nc {token}\td\n".encode()})))
    for option, value in (("--time-budget", "nan"), ("--time-budget", "-1"), ("--lr", "nan"),
                          ("--max-steps", "-5")):
        out.append(Probe("silent", f"train{option}={value}",
                         ["train", "generator", "--data", "{work}/d.tsv", option, value, "-o",
                          "{work}/g.pt"], message=option, setup=with_files(**{"d.tsv": PAIRS})))
    api = {"geca-seed-2^64+5": "compgen.geca(compgen.load('{work}/d.tsv'), seed=2**64 + 5)",
           "csl-n-2.5": "compgen.csl(compgen.load('{work}/d.tsv'), n=2.5)",
           "sample-n-2.9": "compgen.sample('{shipped}', n=2.9)",
           "sample-raise-no": "compgen.sample('{shipped}', n=2, raise_temperature='no')",
           "sample-temperature-hot": "compgen.sample('{shipped}', n=2, temperature='hot')",
           "perplexity-string": "compgen.perplexity('{work}/d.tsv', 'jump twice')",
           "perplexity-empty": "compgen.perplexity('{work}/d.tsv', [])",
           "perplexity-none": "compgen.perplexity('{work}/d.tsv', [None])",
           "load-split-training": "compgen.load('{work}/d.tsv', split='training')",
           "load-columns-5": "compgen.load('{work}/d.tsv', columns=5)",
           "load-wrong-schema": "import polars as pl; compgen.load(pl.DataFrame("
                                "{{'x': [[1]], 'y': [['a']], 'split': ['train']}}))",
           "kenlm-order-text": "compgen.kenlm_train('{work}/d.tsv', '{work}/m.arpa', order='5')",
           "train-max-steps--5": "compgen.train_generator('{work}/d.tsv', '{work}/g.pt', "
                                 "max_steps=-5)"}
    for name, call in api.items():
        out.append(Probe("api", name, [], python=call, setup=with_files(**{"d.tsv": PAIRS})))
    # tracebacks once: each must now be one error line
    def self_link(work: Path, names: dict) -> None:
        (work / "d").mkdir()
        (work / "d" / "train.tsv").symlink_to(work / "d" / "train.tsv")

    def dict_folder(work: Path, names: dict) -> None:
        (work / "d").mkdir()
        (work / "d" / "dataset_dict.json").write_text('{"splits": null}')

    out.append(Probe("tracebacks", "nested-json", ["data", "stats", "{work}/d.jsonl"],
                     setup=with_files(**{"d.jsonl": b'{"x": ' + b"[" * 100_000 + b"}\n"})))
    out.append(Probe("tracebacks", "self-linked-train", ["data", "stats", "{work}/d"],
                     setup=self_link))
    out.append(Probe("tracebacks", "splits-null", ["data", "stats", "{work}/d"],
                     setup=dict_folder))
    out.append(Probe("tracebacks", "journal-not-utf8", ["sample", "{shipped}", "--n", "2",
                                                        "--resume", "-o", "{work}/s.tsv"],
                     setup=with_files(**{"s.tsv.partial": LATIN1}),
                     outputs=("{work}/s.tsv.partial",)))
    # crashes and hangs: a million threads, a FIFO in a data folder, a device as a file
    for backend in ("onnx", "cpp"):
        out.append(Probe("crash", f"threads-1e6-{backend}",
                         ["sample", "{shipped}", "--n", "2", "--backend", backend, "--threads",
                          "1000000", "-o", "{work}/s.tsv"], message="--threads 1000000"))
    out.append(Probe("crash", "fifo-train", ["data", "stats", "{work}/d"],
                     message="not a regular file",
                     setup=lambda work, names: ((work / "d").mkdir(),
                                                os.mkfifo(work / "d" / "train.tsv"))))
    out.append(Probe("crash", "dev-zero", ["augment", "geca", "/dev/zero", "-o",
                                           "{work}/g.tsv"], message="/dev/zero: not a regular file"))
    out.append(Probe("tracebacks", "partial-is-a-folder",
                     ["sample", "{shipped}", "--n", "2", "-o", "{work}/s.tsv"],
                     setup=lambda work, names: (work / "s.tsv.partial").mkdir()))
    return out


def killed_writer_probe(base: Path) -> dict:
    """kill -9 a `compgen sample` while it writes, then run it again: nothing is left."""
    work = base / "leaks-killed-writer"
    temp = work / ".system-temp"
    temp.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(temp), "OMP_NUM_THREADS": "1"}
    code = ("import os, signal, sys; from compgen.io import atomic_open\n"
            f"with atomic_open({str(work / 's.tsv')!r}) as f:\n"
            "    f.write('half'); f.flush(); os.kill(os.getpid(), signal.SIGKILL)\n")
    subprocess.run([sys.executable, "-c", code], env=env, check=False)
    killed = sorted(p.name for p in work.iterdir() if p.name != ".system-temp")
    proc = compgen(["sample", SHIPPED, "--n", "3", "-o", work / "s.tsv"], work, temp, {})
    after = sorted(p.name for p in work.iterdir() if p.name != ".system-temp")
    left = [n for n in after if n != "s.tsv"] + [f".system-temp/{p}" for p in snapshot(temp)]
    return {"group": "leaks", "probe": "killed-writer", "command": "kill -9 while writing, "
            "then compgen sample -o s.tsv", "exit": proc.returncode,
            "stderr": proc.stderr.splitlines()[-3:], "left_behind": left,
            "traceback": "Traceback" in proc.stderr, "killed_left": killed,
            "as_expected": proc.returncode == 0 and not left and len(killed) == 1,
            "seconds": 0.0}


def killed_outcome(probe: str, command: str, again, left: list, killed: list) -> dict:
    """A kill -9 probe's record: the killed run left exactly one temp folder, and the run
    after it succeeded and left nothing (the killed one swept)."""
    return {"group": "leaks", "probe": probe, "command": command, "exit": again.returncode,
            "stderr": again.stderr.splitlines()[-3:], "left_behind": left,
            "traceback": "Traceback" in again.stderr, "killed_left": killed,
            "as_expected": again.returncode == 0 and not left and len(killed) == 1,
            "seconds": 0.0}


def killed_temp_folder_probes(base: Path) -> list[dict]:
    """kill -9 `compgen lm train` while lmplz works, and a GECA spill while it spills, then
    run each again: the killed run's temp folder is swept, nothing is left."""
    from compgen.augment.geca.partitions import SPILL_PREFIX
    from compgen.lm.kenlm_tools import LMPLZ_PREFIX

    results = []
    work = base / "leaks-killed-lm-train"
    temp = work / ".system-temp"
    temp.mkdir(parents=True)
    (work / "c.txt").write_text("".join(f"w{i % 97} w{i % 89} w{i % 83} w{i % 79}\n"
                                        for i in range(200_000)))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(temp), "OMP_NUM_THREADS": "1"}
    train = [sys.executable, "-m", "compgen", "lm", "train", work / "c.txt", "-o",
             work / "m.arpa", "--order", "3", "--discount_fallback"]
    proc = subprocess.Popen(train, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not list(temp.glob(f"{LMPLZ_PREFIX}*")) and proc.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    killed = [p.name for p in temp.glob(f"{LMPLZ_PREFIX}*")]
    again = compgen(train[3:], work, temp, {})
    left = [f".system-temp/{p}" for p in snapshot(temp)]
    results.append(killed_outcome("killed-lm-train",
                                  "kill -9 while lmplz runs, then compgen lm train again",
                                  again, left, killed))
    work = base / "leaks-killed-geca-spill"
    work.mkdir(parents=True)
    code = ("import os, signal, sys\nfrom compgen.augment.geca.partitions import spill_folder\n"
            "with spill_folder(sys.argv[1]) as folder:\n"
            "    (folder / 'part-0.parquet').write_bytes(b'x')\n"
            "    if sys.argv[2] == 'kill': os.kill(os.getpid(), signal.SIGKILL)\n")
    subprocess.run([sys.executable, "-c", code, work, "kill"], env=env, check=False)
    killed = [p.name for p in work.glob(f"{SPILL_PREFIX}*")]
    again = subprocess.run([sys.executable, "-c", code, work, "run"], env=env, check=False,
                           capture_output=True, text=True)
    left = sorted(p.name for p in work.iterdir())
    results.append(killed_outcome("killed-geca-spill",
                                  "kill -9 while GECA spills, then spill again", again, left,
                                  killed))
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", help="probe groups to run (repeatable)")
    parser.add_argument("--json", type=Path, help="write every probe's outcome here")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args(argv)
    base = args.keep or Path(tempfile.mkdtemp(prefix="compgen-probes-"))
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        fixtures = make_fixtures(base / "fixtures")
        chosen = [p for p in probes() if not args.only or p.group in args.only]
        results = []
        for i, probe in enumerate(chosen, 1):
            result = run_probe(probe, fixtures, base)
            results.append(result)
            mark = "ok " if result["as_expected"] else "BAD"
            print(f"[{i:3d}/{len(chosen)}] {mark} {probe.group}/{probe.name} (exit "
                  f"{result['exit']}, {result['seconds']} s) {result['stderr'][-1:]}", flush=True)
        if not args.only or "leaks" in args.only:
            results.append(killed_writer_probe(base))
            results.extend(killed_temp_folder_probes(base))
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    tracebacks = sum(r["traceback"] for r in results)
    left = sum(len(r["left_behind"]) for r in results)
    unexpected = [f"{r['group']}/{r['probe']}" for r in results if not r["as_expected"]]
    print(f"{len(results)} probes: {tracebacks} tracebacks, {left} files left behind, "
          f"{len(unexpected)} not as expected {unexpected}")
    if args.json:
        args.json.write_text(json.dumps({"probes": len(results), "tracebacks": tracebacks,
                                         "files_left_behind": left, "not_as_expected": unexpected,
                                         "results": results}, indent=2))
    return 1 if tracebacks or left or unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
