"""Reduced-precision copies of an export's sampling graphs, built on first use and kept in
the user's cache (``~/.cache/compgen/reduced``, keyed by the graphs' bytes and the
library version, and for bf16 the model code it is traced from), never in the export folder
(its files are checksummed):

* bf16: the TorchScript sampler traced under CPU bf16 autocast from the eager model in
  ``model.ts`` (``export_torchscript(bf16=True)``), for the torchscript backend on CPUs
  with AVX512-BF16 or AMX units;
* bf16 compiled: the encoder and the step of those graphs compiled ahead of time by
  AOTInductor (``compgen.runtimes.inductor``), for ``--backend torch`` and the C++
  runner;
* int8: the three ONNX graphs with dynamically quantised int8 weights (ONNX Runtime's
  ``quantize_dynamic``), for the onnx backend.

Neither is checked equal to fp32: their samples differ where bf16 or int8 rounding moves
a choice; ``scripts/bench/bench_sampling.py`` measures how often, and the sample quality.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from importlib import metadata
from pathlib import Path

from compgen.errors import SettingError, UserError
from compgen.io import keep_torch_compiler_cache, remove_stale_staging, staging_prefix
from compgen.runtimes.artifact import eager_model
from compgen.runtimes.graphs import deterministic
from compgen.runtimes.inductor import build_libraries, compile_error, find_compiler
from compgen.runtimes.manifest import Manifest
from compgen.runtimes.onnx_export import GENERATOR_GRAPHS
from compgen.runtimes.torchscript_trace import export_torchscript
from compgen.system import cache


def _cache() -> Path:
    return cache.store("reduced")


def _key(*paths: Path, version: str) -> str:
    digest = hashlib.sha256(version.encode())
    for path in paths:
        cache.file_digest(path, digest)
    return digest.hexdigest()[:20]


def _staged(target: Path) -> Path:
    """A fresh name beside ``target`` to build it under (renamed over it when done)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(target)
    return target.with_name(staging_prefix(target) + "tmp")


def check_bf16_variant(manifest: Manifest) -> None:
    if manifest.variant != "scan":
        raise SettingError("`precision` bf16: the bf16 sampling graphs exist for SCAN "
                           "generators (variant scan) only; use `precision` fp32")


def _torch_version() -> str:
    """Without importing torch: a cached build is found without it (the C++ runner's path)."""
    return metadata.version("torch")


def bf16_sampler(folder: Path, manifest: Manifest) -> Path:
    """``model.ts`` of ``folder`` as the bf16 sampler (built once, ~10 s)."""
    check_bf16_variant(manifest)
    folder = Path(folder)
    # the bf16 graphs are traced from this library's model code: a change to it is a new key
    code = sorted((Path(__file__).parents[1] / "models").glob("*.py"))
    code.append(Path(__file__).with_name("torchscript_trace.py"))
    target = _cache() / (_key(folder / "model.ts", *code, version=_torch_version()) + "-bf16.ts")

    def build() -> None:
        model = deterministic(eager_model(folder, manifest)[0])
        staged = _staged(target)
        try:
            export_torchscript(model, staged, manifest.max_len, bf16=True)
            os.replace(staged, target)
        finally:
            staged.unlink(missing_ok=True)

    return cache.ensure(target, "the bf16 sampler", build)


def bf16_libraries(folder: Path, manifest: Manifest) -> Path:
    """A folder holding ``folder``'s bf16 encoder and step compiled by AOTInductor
    (``compgen.runtimes.inductor``; built once, about 30 s)."""
    check_bf16_variant(manifest)
    width = manifest.prototype_width
    if not width:
        raise SettingError(f"{folder}: the export has no fixed prototype width; export it "
                           "again to sample it in bf16 with `backend` torch or cpp")
    folder = Path(folder)
    code = sorted((Path(__file__).parents[1] / "models").glob("*.py"))
    code += [Path(__file__).with_name(name) for name in ("inductor.py", "graphs.py")]
    target = _cache() / (_key(folder / "model.ts", *code, version=_torch_version()) + "-bf16-aoti")

    def build(staged: Path) -> None:
        keep_torch_compiler_cache()  # again: torch's compiler may have been imported first
        try:
            find_compiler()
            build_libraries(deterministic(eager_model(folder, manifest)[0]), staged, width)
        except UserError:
            raise
        except Exception as error:  # Inductor reports a failed C++ build as its own errors
            raise compile_error(error) from error

    return _built_folder(target, build, "the bf16 compiled libraries")


def int8_graphs(folder: Path) -> Path:
    """A folder holding ``folder``'s ONNX graphs with int8 weights (built once)."""
    # start-up: the bf16 samplers (torch, cpp) load no ONNX Runtime (0.1 s with its
    # quantization tools)
    import onnxruntime as ort
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folder = Path(folder)
    graphs = [folder / name for name in GENERATOR_GRAPHS]
    target = _cache() / (_key(*graphs, version=ort.__version__) + "-int8")

    def build(staged: Path) -> None:
        for path in graphs:
            quantize_dynamic(path, staged / path.name, weight_type=QuantType.QInt8)

    return _built_folder(target, build, "the int8 graphs")


def _built_folder(target: Path, build, what: str) -> Path:
    """``target``, made by ``build(staged)`` in a staged folder renamed over it when done
    (nothing left behind on failure) unless it exists already and matches its record."""

    def build_staged() -> None:
        staged = _staged(target)
        try:
            staged.mkdir()
            build(staged)
            os.replace(staged, target)
        finally:
            shutil.rmtree(staged, ignore_errors=True)

    return cache.ensure(target, what, build_staged)
