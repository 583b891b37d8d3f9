"""A cheap check, when an export folder is loaded, that its TorchScript model and its ONNX
graphs still are the same model: both decode a few inputs greedily and must agree (a
near-tie, equal log-probabilities within tolerance, is not a disagreement). Checksums
catch damage; this catches consistent replacement (a foreign model.ts or graph with a
re-hashed manifest) and graphs that load but do not run.

The check is a function of the files' bytes (the manifest's checksums, verified by
``load_manifest`` before) and of the installed torch and ONNX Runtime: a passed check is
recorded under the user's cache with that key, and a folder checked before is not decoded
again. The C++ runner's path of ``compgen sample`` then loads no torch at all."""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

import numpy as np

from compgen.errors import UserError
from compgen.export.artifact import TOLERANCE, load_torchscript
from compgen.io import user_cache

CHECK_SETS = 4
CHECK_VERSION = 1   # raise when the check itself changes: older records no longer count


def passed_record(manifest: dict) -> Path:
    """Where a passed check of these exact files, with these runtimes, is recorded."""
    versions = {}
    for package in ("torch", "onnxruntime", "onnxruntime-gpu"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    key = json.dumps({"files": manifest["files"], "versions": versions,
                      "check": CHECK_VERSION}, sort_keys=True)
    return user_cache("checked") / hashlib.sha256(key.encode()).hexdigest()


def _trimmed(tokens: np.ndarray, logp: np.ndarray, eos: int) -> list[tuple[tuple, float]]:
    rows = []
    for row, scores in zip(tokens.tolist(), logp.tolist()):
        end = row.index(eos) + 1 if eos in row else len(row)
        rows.append((tuple(row[:end]), float(sum(scores[:end]))))
    return rows


def _agree(folder: Path, ts_rows, onnx_rows) -> None:
    for i, ((a, pa), (b, pb)) in enumerate(zip(ts_rows, onnx_rows)):
        if a != b and abs(pa - pb) > TOLERANCE * max(1.0, abs(pa)) * 10:
            raise UserError(f"{folder}: model.ts and the ONNX graphs disagree on check input "
                            f"{i} (greedy log-prob {pa:.4f} vs {pb:.4f}); the folder holds "
                            "files of different models, export it again")


def _run(folder: Path, what: str, call):
    try:
        return call()
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 (foreign graphs fail inside ONNX Runtime/TorchScript)
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{folder}: {what} does not run on this folder's inputs ({reason})") from None


def check_generator_backends(folder: Path, manifest: dict, threads: int | None = 1) -> None:
    """``manifest``: as ``load_manifest`` returned it (its checksums match the files)."""
    record = passed_record(manifest)
    if record.is_file():
        return
    _decode_and_compare(folder, manifest, threads)
    try:   # only a shortcut for the next call: a cache that cannot be written is no error
        record.parent.mkdir(parents=True, exist_ok=True)
        record.touch()
    except OSError:
        pass


def _decode_and_compare(folder: Path, manifest: dict, threads: int | None) -> None:
    from compgen.data.vocab import EOS_ID
    from compgen.decoding import MODES, Contract, decode, prior_z
    from compgen.export.artifact import read_prototypes
    from compgen.export.generator import pad_tuples
    from compgen.export.onnx_decoder import OnnxGenerator
    from compgen.export.torchscript_decoder import TorchScriptGenerator

    contract = _run(folder, "manifest.json", lambda: Contract.from_manifest(manifest["decoding"]))
    nproto = manifest["model"]["nproto"]
    tuples = read_prototypes(folder / "prototypes.txt", nproto)[:CHECK_SETS]
    k = len(tuples) if nproto else CHECK_SETS
    vocab_size = manifest["model"]["vocab_size"]
    for tup in tuples:
        if any(t < 0 or t >= vocab_size for p in tup for t in p):
            raise UserError(f"{folder / 'prototypes.txt'}: token ids outside the vocabulary")
    protos = pad_tuples(tuples, nproto, k, contract.prototype_width).numpy()
    ids = np.arange(k, dtype=np.int64)
    z = prior_z(contract, 0, ids)
    load_torchscript(folder / "model.ts")   # a file that is no TorchScript: one clear line
    rows = []
    for what, backend in (("model.ts", TorchScriptGenerator), ("the ONNX graphs", OnnxGenerator)):
        stepper = _run(folder, what, lambda backend=backend: backend(folder, manifest, threads).stepper)
        tokens, logp = _run(folder, what, lambda stepper=stepper: decode(
            stepper(), contract, protos, z, MODES["greedy"], 1.0, 0, ids))
        rows.append(_trimmed(tokens, logp, EOS_ID))
    _agree(folder, *rows)


def check_predictor_backends(folder: Path, manifest: dict, threads: int | None = 1) -> None:
    import torch

    from compgen.data.vocab import EOS_ID
    from compgen.export.onnx_predictor_decoder import OnnxPredictor

    max_len, vocab_size = manifest["decoding"]["max_len"], manifest["model"]["vocab_size"]
    # inputs of ordinary tokens (ids after the specials), of a few lengths
    from compgen.models.seq2seq import collate

    rng = np.random.default_rng(0)
    inputs = [rng.integers(6, vocab_size, n).tolist() for n in (2, 4, 6, 8)[:CHECK_SETS]]
    source = collate(inputs, max_len).numpy()
    scripted = load_torchscript(folder / "model.ts")
    with torch.no_grad():
        ts = _run(folder, "model.ts", lambda: scripted.greedy(torch.from_numpy(source), max_len))
    onnx = _run(folder, "the ONNX graphs", lambda: OnnxPredictor(folder, manifest, threads))
    on = _run(folder, "the ONNX graphs", lambda: onnx.greedy(source, max_len))
    _agree(folder, _trimmed(ts[0].numpy(), ts[1].numpy(), EOS_ID), _trimmed(*on, EOS_ID))
