"""Reduced-precision sampling of an export is opt-in (``--precision bf16|int8``): it runs
where the backend and the CPU can run it, is refused in one line elsewhere, and its samples
are its own (measured against fp32 by scripts/bench/bench_sampling.py, not equal to them)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compgen.cli.common import flag_of
from compgen.decoding.options import SampleOptions
from compgen.errors import SettingError, UserError
from compgen.runtimes.artifact import load_manifest
from compgen.runtimes.cpp import build_runner, job_text, run_harness
from compgen.runtimes.reduced import bf16_sampler
from compgen.sampling.run import sample_export
from compgen.system.precision import cpu_computes_bf16, cpu_has_bf16

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"


def samples(backend: str, precision: str, tmp_path: Path) -> tuple[str, dict]:
    out = tmp_path / f"{backend}-{precision}.tsv"
    run = sample_export(SHIPPED, n=12, backend=backend, precision=precision,
                        strategy="temperature", temperature=0.7, nsamples=12, batch_size=16,
                        seed=5, threads=1, out=out, log=lambda m: None)
    assert len(run.samples) == 12
    return out.read_text(encoding="utf-8"), {(tuple(s.x), tuple(s.y)): s.logprob
                                             for s in run.samples}


def assert_reduced(reduced: dict, fp32: dict) -> None:
    """The reduced path really ran: some log-prob of a pair both kept moved by more than
    float32 rounding does between backends (1e-4)."""
    common = set(reduced) & set(fp32)
    assert common
    assert max(abs(reduced[p] - fp32[p]) for p in common) > 1e-3


def test_compiled_bf16_samples_are_the_same_from_python_and_cpp(tmp_path, one_torch_thread):
    """``--precision bf16`` on ``--backend torch`` and ``cpp``: one set of libraries
    compiled by AOTInductor, so one seed gives one result; on ``torchscript``, its own
    traced graphs."""
    if not cpu_has_bf16():
        with pytest.raises(UserError, match="this CPU has no bf16 units"):
            samples("torch", "bf16", tmp_path)
        return
    build_runner(log=lambda m: None)
    compiled_text, compiled = samples("torch", "bf16", tmp_path)
    runner_text, _ = samples("cpp", "bf16", tmp_path)
    assert runner_text == compiled_text
    _, scripted = samples("torchscript", "bf16", tmp_path)
    _, fp32 = samples("torch", "fp32", tmp_path)
    assert_reduced(compiled, fp32)
    assert_reduced(scripted, fp32)
    assert_reduced(compiled, scripted)  # compiled, not the TorchScript graphs replayed


BF16_CPU = "processor : 0\nflags : fpu sse4_2 avx avx2 fma avx512f avx512_bf16 amx_bf16\n"


def compile_bf16(tmp_path: Path, compiler: Path) -> tuple[subprocess.CompletedProcess, Path]:
    """``sample --backend torch --precision bf16`` run as on a CPU with bf16 units (whatever
    this one has: ``$COMPGEN_CPUINFO``), so the compile path runs on any CPU, with
    ``compiler`` as ``$CXX`` and a fresh cache."""
    info = tmp_path / "cpuinfo"
    info.write_text(BF16_CPU)
    out = tmp_path / "s.tsv"
    proc = subprocess.run([sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--backend",
                           "torch", "--precision", "bf16", "--n", "3", "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "CXX": str(compiler),
                               "COMPGEN_CPUINFO": str(info),
                               "XDG_CACHE_HOME": str(tmp_path / "cache"),
                               "TMPDIR": str(tmp_path / "tmp")})
    return proc, out


def assert_failed_compile_left_nothing(proc: subprocess.CompletedProcess, out: Path,
                                       tmp_path: Path) -> None:
    assert proc.returncode == 2
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        "error: --precision bf16 with --backend torch or cpp compiles the model with "
        "TorchInductor, which failed"), lines
    assert not out.exists()
    reduced = tmp_path / "cache" / "compgen" / "reduced"
    assert not reduced.exists() or not any(reduced.iterdir()), list(reduced.iterdir())
    assert not list((tmp_path / "tmp").glob("torchinductor*"))


def test_a_failed_compilation_is_one_error_line(tmp_path):
    """No C++ compiler (``$CXX`` names none) and nothing compiled yet: refused before the
    model is traced, and nothing is left in the cache (no lock, no staged folder)."""
    (tmp_path / "tmp").mkdir()
    proc, out = compile_bf16(tmp_path, tmp_path / "no-cxx")
    assert_failed_compile_left_nothing(proc, out, tmp_path)
    assert "InvalidCxxCompiler" in proc.stderr or "compiler" in proc.stderr.lower()


def test_a_compiler_failing_midway_leaves_nothing(tmp_path):
    """A compiler that answers ``--version`` and fails every build: the trace and the
    export run, the staged libraries' folder is removed, and so is the build's lock."""
    (tmp_path / "tmp").mkdir()
    compiler = tmp_path / "broken-cxx"
    compiler.write_text('#!/bin/sh\n[ "$1" = --version ] && { echo "g++ (GCC) 12.2.0"; '
                        'exit 0; }\necho "internal compiler error" >&2\nexit 1\n')
    compiler.chmod(0o755)
    proc, out = compile_bf16(tmp_path, compiler)
    assert_failed_compile_left_nothing(proc, out, tmp_path)


def test_int8_samples_come_from_the_int8_graphs(tmp_path, one_torch_thread):
    _, reduced = samples("onnx", "int8", tmp_path)
    assert_reduced(reduced, samples("onnx", "fp32", tmp_path)[1])


@pytest.mark.parametrize("backend,precision,message", [
    ("onnx", "bf16", "--precision bf16 runs on --backend torchscript or cpp or torch (not onnx)"),
    ("torchscript", "int8", "--precision int8 runs on --backend onnx (not torchscript)"),
    ("torch", "int8", "--precision int8 runs on --backend onnx (not torch)"),
    ("onnx", "fp16", "--precision fp16: unknown (valid: fp32, bf16, int8)"),
])
def test_a_precision_the_backend_cannot_run_is_refused(backend, precision, message):
    with pytest.raises(SettingError) as refused:
        sample_export(SHIPPED, n=3, backend=backend, precision=precision, log=lambda m: None)
    # the library names the settings, the command line their flags
    assert str(refused.value) == message.replace("--", "")
    assert refused.value.text(flag_of) == message


def test_bf16_without_bf16_units_is_one_error_line(tmp_path):
    """Run as on a CPU without bf16 units, whatever this one has ($COMPGEN_CPUINFO)."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags : fpu sse4_2 avx avx2 fma avx512f\n")
    out = tmp_path / "s.tsv"
    proc = subprocess.run([sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--backend",
                           "cpp", "--precision", "bf16", "--n", "3", "-o", str(out)],
                          capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "COMPGEN_CPUINFO": str(info)})
    assert proc.returncode == 2
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert lines == [("error: --precision bf16: this CPU has no bf16 units (no amx_bf16 or "
                     "avx512_bf16 in the CPU flags); use --precision fp32 or int8 "
                     "(--backend onnx)")]
    assert not out.exists()



def test_the_bf16_graphs_decode_a_batch_in_the_runner(tmp_path, one_torch_thread):
    """Greedy rows of a batch of 32 under bf16 autocast in libtorch (a dtype mismatch in the
    attention's position scatter once stopped the runner past batch 1, with 2 threads and
    not with 1). The graphs run under autocast on any CPU torch computes bf16 on (with bf16
    units or emulated on AVX-512); the CLI refuses bf16 where the CPU has no bf16 units.
    Where torch computes no bf16 at all (AVX2 only), exporting them is an error."""
    if not cpu_computes_bf16():
        with pytest.raises(RuntimeError, match="bf16|LSTM"):
            bf16_sampler(SHIPPED, load_manifest(SHIPPED))
        return
    manifest = load_manifest(SHIPPED)
    contract = manifest.contract()
    binary = build_runner(log=lambda m: None)
    out = tmp_path / "bf16.tsv"
    options = SampleOptions(strategy="greedy", temperature=1.0, seed=0, n=32, batch_size=32,
                            max_rounds=1, threads=2)
    job = job_text(SHIPPED, contract, options, out=out, raw=True, zero_latent=True,
                   model=bf16_sampler(SHIPPED, manifest))
    run_harness(binary, job, log=lambda m: None)
    assert len(out.read_text(encoding="utf-8").splitlines()) == 32
