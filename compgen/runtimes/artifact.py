"""What every export folder shares, whatever model it holds: the format tag, the parity
tolerance, the vocabulary files, the manifest's checksums, and the rule that a folder is
only moved into place once its validation passed."""

from __future__ import annotations

import io
import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np

from compgen.data.vocab import Vocab
from compgen.errors import UserError, read_text
from compgen.io import (
    current_umask,
    keep_torch_compiler_cache,
    remove_stale_staging,
    staging_prefix,
)
from compgen.runtimes.card import write_card
from compgen.runtimes.manifest import FORMAT, MANIFEST_DIGEST, Manifest
from compgen.runtimes.manifest_file import manifest_digest, read_manifest_json, write_manifest
from compgen.system.cache import checked_copy, copy_hashing, file_digest

TOLERANCE = 1e-4    # max |Δ log p| / max(1, |log p|) per step, over tokens with log p > FLOOR
LOGP_FLOOR = -30.0  # below this (p < 1e-13) float32 rounding of tiny masses dominates
TRAINING_PAIRS = "train.tsv"  # the training pairs, for the unique / novel filters


def sha256(path: Path) -> str:
    return file_digest(path).hexdigest()


def save_scripted(scripted, path) -> None:
    """Save a TorchScript module through memory: torch's file writer aborts the process on
    a full disk, a Python write raises OSError (one error line)."""
    # start-up: `compgen sample --backend onnx|cpp` reads export folders here and loads no torch
    import torch

    buffer = io.BytesIO()
    torch.jit.save(scripted, buffer)
    Path(path).write_bytes(buffer.getbuffer())


def default_output(checkpoint: Path) -> Path:
    return Path("exported") / checkpoint.stem


def write_vocab(folder: Path, vocab: Vocab) -> None:
    """``vocab.json``, and ``vocab.txt`` (one token per line) for runners without JSON."""
    vocab.save(folder / "vocab.json")
    (folder / "vocab.txt").write_text("\n".join(vocab.tokens) + "\n", encoding="utf-8")


def _compared(a: np.ndarray, b: np.ndarray, steps: np.ndarray | None) -> np.ndarray:
    """Entries compared: either log-prob above ``LOGP_FLOOR``, at the ``steps`` (B, T) a
    decoder reaches (teacher forcing past a row's </s> feeds padding no decoder sees)."""
    keep = (a > LOGP_FLOOR) | (b > LOGP_FLOOR)
    return keep if steps is None else keep & steps[..., None]


def logp_diff(a: np.ndarray, b: np.ndarray, steps: np.ndarray | None = None) -> float:
    """Max |a - b| over the compared entries (``_compared``)."""
    keep = _compared(a, b, steps)
    return float(np.abs(a - b)[keep].max()) if keep.any() else 0.0


def logp_rel_diff(a: np.ndarray, b: np.ndarray, steps: np.ndarray | None = None) -> float:
    """Max |a - b| / max(1, |b|) over the compared entries. float32 rounding of a
    log-softmax grows with the magnitude of the log-prob: on the H 256 SCAN generator 7 of
    275,200 entries differ by more than 1e-4 between ONNX Runtime and PyTorch, the largest
    (1.5e-4) at log p -4.3, while greedy and beam outputs match."""
    keep = _compared(a, b, steps)
    if not keep.any():
        return 0.0
    return float((np.abs(a - b) / np.maximum(1.0, np.abs(b)))[keep].max())


def parity_failures(figures: dict) -> list[str]:
    # start-up: `compgen sample --backend onnx|cpp` reads export folders here and loads no torch
    from compgen.runtimes.ties import describe

    tolerance = figures.get("tolerance", TOLERANCE)   # the kind's, recorded with its figures
    bad = []
    for name, f in figures["backends"].items():
        for mode in ("greedy", "beam"):
            if f.get(f"{mode}_identical", True):
                continue
            found = f.get(f"{mode}_disagreements")
            if found:
                bad.append(describe(name, mode, found[0],
                                    f.get(f"{mode}_disagreement_count", len(found))))
            else:
                bad.append(f"{name}: {mode} outputs differ from the eager model")
        # the relative figure where it was measured (generators), else the absolute one
        diff = f.get("max_rel_logp_diff", f.get("max_abs_logp_diff", 0.0))
        if diff > tolerance:
            bad.append(f"{name}: log-prob difference {diff:.2e} > {tolerance:g}")
    return bad


@contextmanager
def staged_folder(out: Path):
    """A temporary folder next to ``out`` that replaces ``out`` only when the block ends
    without an error: a failed validation leaves no artifact (and keeps an older one).
    A killed export's staging folder is removed by the next export to ``out``; the folder
    gets the mode the umask gives (mkdtemp alone would make it 0700)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(out)
    tmp = Path(tempfile.mkdtemp(prefix=staging_prefix(out), dir=out.parent))
    try:
        tmp.chmod(0o777 & ~current_umask())
        yield tmp
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def checked_private_copy(folder: Path, manifest: Manifest, cached=()):
    """A private folder holding copies of ``folder``'s files but its ONNX graphs, each
    checked against the manifest as it is copied, and of the ``cached`` entries of the
    user's cache (checked against their records), under the same names: a process handed
    these loads the bytes checked, whatever happens to the originals meanwhile. Removed
    when the block ends (a killed run's copy by the next one)."""
    stem = Path(tempfile.gettempdir()) / "compgen-checked"
    remove_stale_staging(stem)
    tmp = Path(tempfile.mkdtemp(prefix=staging_prefix(stem)))
    try:
        for name, digest in manifest.files.items():
            if name.endswith(".onnx"):
                continue
            if copy_hashing(folder / name, tmp / name).hexdigest() != digest:
                raise UserError(f"{folder / name}: checksum does not match the manifest "
                                "(changed since it was checked)")
        for entry in cached:
            if not checked_copy(entry, tmp / Path(entry).name):
                raise UserError(f"{entry}: does not match its record in the cache (changed "
                                "since it was checked); run the command again to rebuild it")
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def seal(folder: Path, manifest: Manifest, figures: dict, checkpoint: Path,
         start: float) -> Manifest:
    """Refuse a folder whose parity figures fail; otherwise record them, the checksum of
    every file and the export time in ``manifest.json`` (written last, then the model card
    rendered from it); returns the manifest as written."""
    bad = parity_failures(figures)
    if bad:
        raise UserError(f"export of {checkpoint} failed validation: " + "; ".join(bad))
    files = {p.name: sha256(p) for p in sorted(folder.iterdir()) if p.is_file()}
    manifest = write_manifest(folder, replace(
        manifest, parity=figures, files=files,
        export_seconds=round(time.perf_counter() - start, 2)))
    write_card(folder, manifest)   # README.md, from the manifest just written
    return manifest


NOT_LISTED = {"manifest.json", "README.md"}   # README.md: the card rendered from the manifest


def verify_files(folder: Path, document: dict) -> None:
    """The manifest's JSON object matches its own checksum; every file of the folder is
    listed in it with its sha256, and matches it. A manifest without checksums is refused:
    nothing could be checked."""
    path = folder / "manifest.json"
    if MANIFEST_DIGEST not in document:
        raise UserError(f"{path}: no checksum of its own ({MANIFEST_DIGEST}; exported by an "
                        f"older compgen): export it again (compgen export {folder} -o NEW)")
    if document[MANIFEST_DIGEST] != manifest_digest(document):
        raise UserError(f"{path}: does not match its own checksum ({MANIFEST_DIGEST}): "
                        "edited or corrupted")
    files = document.get("files")
    if not isinstance(files, dict) or not files:
        raise UserError(f"{path}: no file checksums (\"files\"); the folder cannot be verified, "
                        "export it again")
    for name, digest in files.items():
        if not isinstance(digest, str) or len(digest) != 64 or Path(name).name != name:
            raise UserError(f"{path}: bad checksum entry for {name!r}")
        file = folder / name
        if not file.is_file():
            raise UserError(f"{file}: missing (listed in the manifest)")
        if sha256(file) != digest:
            raise UserError(f"{file}: checksum does not match the manifest (corrupted or edited)")
    unlisted = sorted(p.name for p in folder.iterdir()
                      if p.name not in files and p.name not in NOT_LISTED and not p.name.startswith("."))
    if unlisted:
        raise UserError(f"{folder / unlisted[0]}: not listed in the manifest (a foreign file)")


def load_manifest(folder, *, older_ok: bool = False) -> Manifest:
    """Read and check an export folder: manifest present, every file listed with a matching
    checksum, the fields the runtimes read valid (``Manifest.from_json``), the vocabulary
    of the stated size. ``older_ok``: a manifest without a checksum of its own, from before
    there was one, is read (to export the folder again, which adds it); one that has it
    must match it."""
    folder = Path(folder)
    document = read_manifest_json(folder)
    path = folder / "manifest.json"
    if document.get("format") != FORMAT:
        raise UserError(f"{path}: unknown export format {document.get('format')!r}")
    if older_ok and MANIFEST_DIGEST not in document:
        document = {**document, MANIFEST_DIGEST: manifest_digest(document)}
    verify_files(folder, document)
    manifest = Manifest.from_json(document, path)
    vocab = Vocab.load(folder / "vocab.json")
    if len(vocab) != manifest.vocab_size:
        raise UserError(f"{folder / 'vocab.json'}: {len(vocab)} tokens, the manifest says "
                        f"{manifest.vocab_size}")
    return manifest


def read_prototypes(path: Path, nproto: int) -> list[list[list[int]]]:
    """Prototype tuples of an export folder (formatted ids)."""
    if nproto == 0:
        return []
    tuples = []
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != nproto:
            raise UserError(f"{path}:{lineno}: expected {nproto} prototypes per line")
        try:
            tuples.append([[int(t) for t in f.split()] for f in fields])
        except ValueError:
            raise UserError(f"{path}:{lineno}: expected token ids (integers)") from None
    if not tuples:
        raise UserError(f"{path}: no prototypes")
    return tuples


def load_torchscript(path: Path, device=None):
    """A TorchScript module (on ``device``, a ``compgen.device.Device``; default: the CPU),
    or a UserError naming the file."""
    # start-up: `compgen sample --backend onnx|cpp` reads export folders here and loads no torch
    import torch

    keep_torch_compiler_cache()  # before loading imports torch's compiler (its /tmp cache)
    try:
        if device is not None and device.cuda:
            return torch.jit.load(str(path), map_location=device.torch)
        return torch.jit.load(str(path))
    except (RuntimeError, ValueError, OSError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{path}: cannot load the TorchScript model ({reason[:200]})") from None


def eager_model(folder: Path, manifest: Manifest) -> tuple:
    """(model, vocab, config) of an export folder: the eager model rebuilt from the
    manifest's config and the weights stored in ``model.ts`` (folders of earlier versions
    carry them as ``generator.pt``)."""
    # start-up: `compgen sample --backend onnx|cpp` reads export folders here and loads no torch
    from compgen.training.checkpoint import build_recombine, load_generator

    folder = Path(folder)
    if (folder / "generator.pt").is_file():
        return load_generator(folder / "generator.pt")
    vocab = Vocab.load(folder / "vocab.json")
    model = build_recombine(manifest.config, len(vocab))
    prefix = "encoder.model."  # the scripted sampler's encoder holds every eager weight
    scripted = load_torchscript(folder / "model.ts").state_dict()
    try:
        model.load_state_dict({k.removeprefix(prefix): v for k, v in scripted.items()
                               if k.startswith(prefix)})
    except RuntimeError:
        raise UserError(f"{folder / 'model.ts'}: its weights do not fit the manifest's model "
                        "config") from None
    model.eval()
    return model, vocab, manifest.config
