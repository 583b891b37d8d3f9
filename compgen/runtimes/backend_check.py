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

from compgen.data.vocab import EOS_ID
from compgen.errors import UserError
from compgen.io import atomic_open
from compgen.runtimes.artifact import TOLERANCE, load_torchscript
from compgen.runtimes.manifest import Manifest
from compgen.runtimes.recorded_outputs import (
    CHECK_SETS,
    compare_recorded,
    greedy_rows,
    run,
    trimmed,
)
from compgen.system import cache

CHECK_VERSION = 2   # raise when the check itself changes: older records no longer count


def passed_record(manifest: Manifest) -> Path:
    """Where a passed check of these exact files, with these runtimes, is recorded."""
    versions = {}
    for package in ("torch", "onnxruntime", "onnxruntime-gpu"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    key = json.dumps({"files": manifest.files, "load_check": manifest.load_check,
                      "versions": versions,
                      "check": CHECK_VERSION}, sort_keys=True)
    return cache.store("checked") / hashlib.sha256(key.encode()).hexdigest()


def _record_key(manifest: Manifest) -> str:
    return hashlib.sha256(json.dumps([manifest.files, manifest.load_check],
                                     sort_keys=True).encode()).hexdigest()


def _agree(folder: Path, ts_rows, onnx_rows) -> None:
    for i, ((a, pa), (b, pb)) in enumerate(zip(ts_rows, onnx_rows)):
        if a != b and abs(pa - pb) > TOLERANCE * max(1.0, abs(pa)) * 10:
            raise UserError(f"{folder}: model.ts and the ONNX graphs disagree on check input "
                            f"{i} (greedy log-prob {pa:.4f} vs {pb:.4f}); the folder holds "
                            "files of different models, export it again")


def check_generator_backends(folder: Path, manifest: Manifest, threads: int | None = 1) -> None:
    """``manifest``: as ``load_manifest`` returned it (its checksums match the files)."""
    try:
        record = passed_record(manifest)
    except OSError:
        record = None
    # a record counts only when it names these files and matches its digest: an empty or
    # planted file is no passed check
    if record is not None and cache.verified(record, "a passed-check record") \
            and record.read_text(encoding="utf-8", errors="replace") == _record_key(manifest):
        return
    _decode_and_compare(folder, manifest, threads)
    if record is None:
        return
    try:   # only a shortcut for the next call: a cache that cannot be written is no error
        with atomic_open(record, "w", encoding="utf-8") as out:
            out.write(_record_key(manifest))
        cache.record(record)
    except OSError:
        pass


def _decode_and_compare(folder: Path, manifest: Manifest, threads: int | None) -> None:
    """Both backends agree with each other, and with the rows recorded at export time where
    the manifest has them (exports before ``load_check`` have the cross-check only)."""
    rows = greedy_rows(folder, manifest, threads)
    _agree(folder, rows["torchscript"], rows["onnx"])
    if manifest.load_check is not None:
        compare_recorded(folder, manifest.load_check, rows)


def check_predictor_backends(folder: Path, manifest: Manifest, threads: int | None = 1) -> None:
    # start-up: `compgen sample --backend onnx` loads no torch
    # start-up: a generator's check loads no predictor backend
    from compgen.models.seq2seq import collate, run_greedy
    from compgen.runtimes.onnx_predictor import OnnxPredictor
    from compgen.runtimes.torchscript_predictor import TorchScriptPredictor

    max_len, vocab_size = manifest.max_len, manifest.vocab_size
    # inputs of ordinary tokens (ids after the specials), of a few lengths
    rng = np.random.default_rng(0)
    inputs = [rng.integers(6, vocab_size, n).tolist() for n in (2, 4, 6, 8)[:CHECK_SETS]]
    source = collate(inputs, max_len).numpy()
    scripted = TorchScriptPredictor(load_torchscript(folder / "model.ts"))
    ts = run(folder, "model.ts", lambda: run_greedy(scripted, manifest.step_rules(), source,
                                                     max_len))
    onnx = run(folder, "the ONNX graphs", lambda: OnnxPredictor(folder, manifest, threads))
    on = run(folder, "the ONNX graphs", lambda: onnx.greedy(source, max_len))
    _agree(folder, trimmed(*ts, EOS_ID), trimmed(*on, EOS_ID))
