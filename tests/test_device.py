"""The device resolver (--device auto|cpu|cuda[:N], $COMPGEN_DEVICE), the refusal of a CUDA
device that is not there, the providers a sampling run reports, the provider in the ONNX
Runtime caches' keys, ONNX Runtime's CUDA provider never falling back to the CPU silently,
the GPU stepper's IO binding (run with its buffers on the CPU) and `compgen env --json`.

torch's answers about GPUs are replaced (``torch.cuda.is_available`` / ``device_count``)
only to run the resolver as on a machine with GPUs; everything else is real."""

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
import typer.main

from compgen.cli import app
from compgen.cli.common import flags_in
from compgen.decoding.contract import Contract, prior_z
from compgen.decoding.search import decode, search_for
from compgen.device import (
    CPU,
    DEVICE_ENV,
    Device,
    cuda_out_of_memory,
    ort_session,
    parse_device,
    resolve_device,
)
from compgen.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"


def gpus(monkeypatch, count: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: count)


def test_auto_is_the_cpu_without_a_gpu_and_cuda_with_one(monkeypatch):
    monkeypatch.delenv(DEVICE_ENV, raising=False)
    gpus(monkeypatch, 0)
    assert resolve_device() == CPU and resolve_device("auto") == CPU
    gpus(monkeypatch, 2)
    assert resolve_device() == Device("cuda", 0)
    assert str(resolve_device("auto")) == "cuda:0"
    assert resolve_device("cuda:1") == Device("cuda", 1)
    assert resolve_device("cpu") == CPU
    # work that runs on the CPU only: auto is the CPU there, an explicit cuda stays cuda
    assert resolve_device("auto", auto_cpu=True) == CPU
    assert resolve_device("cuda", auto_cpu=True) == Device("cuda", 0)


def test_cuda_where_there_is_none_or_past_the_last_gpu_is_an_error(monkeypatch):
    gpus(monkeypatch, 0)
    with pytest.raises(UserError, match=r"^device cuda:0: no CUDA device here"):
        resolve_device("cuda")
    gpus(monkeypatch, 2)
    with pytest.raises(UserError, match=r"^device cuda:2: torch sees 2 GPU\(s\)"):
        resolve_device("cuda:2")


def test_the_environment_variable_is_the_default_and_named_in_errors(monkeypatch):
    gpus(monkeypatch, 1)
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert resolve_device() == CPU
    assert resolve_device("cuda") == Device("cuda", 0)  # the option wins over the variable
    monkeypatch.setenv(DEVICE_ENV, "gpu")
    with pytest.raises(UserError, match=f"{DEVICE_ENV} gpu: unknown device"):
        resolve_device()


@pytest.mark.parametrize("text", ["gpu", "cpu:0", "cuda:", "cuda:-1", "auto:1", ""])
def test_malformed_devices_are_refused(text):
    with pytest.raises(UserError, match="unknown device"):
        parse_device(text)


def test_a_cuda_out_of_memory_error_becomes_advice():
    oom = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; ...)")
    advice = cuda_out_of_memory(oom)
    assert "asked for 2.00 GiB" in str(advice) and "smaller batch_size" in str(advice)
    # the command line names the flags
    assert "--batch-size" in flags_in(advice, typer.main.get_command(app))
    assert cuda_out_of_memory(RuntimeError("shape mismatch")) is None


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compgen", *args], check=False, capture_output=True,
                          text=True, timeout=300, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine whose torch sees a GPU")
@pytest.mark.parametrize("command", [
    ["sample", str(SHIPPED), "--n", "2", "--device", "cuda"],
    ["train", "generator", "--data", "scan/jump", "-o", "never.pt", "--device", "cuda"],
])
def test_device_cuda_without_a_gpu_is_one_error_line_exit_2(command, tmp_path):
    if "-o" in command:
        command[command.index("-o") + 1] = str(tmp_path / "g.pt")
    proc = _cli(*command)
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --device cuda:0: no CUDA device")


def test_the_sample_summary_names_the_device_and_the_providers_in_use(tmp_path):
    out = tmp_path / "s.tsv"
    proc = _cli("sample", str(SHIPPED), "--n", "2", "--batch-size", "8", "--threads", "1",
                "--device", "cpu", "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "samples in" in proc.stdout
    assert "on cpu (CPUExecutionProvider), fp32 (" in proc.stdout
    from compgen.sampling.run import sample_export

    run = sample_export(SHIPPED, n=2, nsamples=2, batch_size=8, threads=1, device="cpu",
                        log=lambda m: None)
    assert run.device == "cpu (CPUExecutionProvider)"
    eager = sample_export(SHIPPED, n=2, backend="torch", nsamples=2, batch_size=8, threads=1,
                          log=lambda m: None)
    assert eager.device == "cpu"


def test_the_ort_caches_are_keyed_by_the_provider(tmp_path, monkeypatch):
    from compgen.runtimes.onnx import _optimised_path, open_session

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("COMPGEN_NO_ORT_CACHE", raising=False)
    graph = SHIPPED / "decoder_step.onnx"
    cpu = _optimised_path(graph, CPU.ort_provider)
    cuda = _optimised_path(graph, Device("cuda").ort_provider)
    assert cpu != cuda
    assert cpu.name.endswith("-CPUExecutionProvider.onnx")
    assert cuda.name.endswith("-CUDAExecutionProvider.onnx")
    session = open_session(graph, 1)   # the default: the CPU, cached under its key
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert cpu.is_file() and not cuda.exists()


def test_a_cuda_session_that_onnxruntime_cannot_make_is_an_error_and_prints_nothing(capfd):
    import onnxruntime as ort

    if "CUDAExecutionProvider" in ort.get_available_providers() and torch.cuda.is_available():
        pytest.skip("this machine may really run ONNX Runtime's CUDA provider")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    with pytest.raises(UserError, match="^device cuda:0: onnxruntime .*(no CUDA provider|"
                                        "could not load its CUDA provider)"):
        ort_session(str(SHIPPED / "encoder.onnx"), options, Device("cuda", 0))
    assert capfd.readouterr().out == ""   # no fallback banner where samples would go


def test_the_gpu_steppers_io_binding_decodes_as_the_cpu_stepper():
    """``OnnxCudaStepper`` (state in the device's buffers, swapped and compacted through
    the host) with its buffers placed on the CPU: the same tokens and scores as
    ``OnnxStepper``, greedy and beam (beam reorders rows in place)."""
    from compgen.export.generator import pad_tuples
    from compgen.runtimes.artifact import load_manifest, read_prototypes
    from compgen.runtimes.onnx import OnnxCudaStepper, OnnxGenerator

    manifest = load_manifest(SHIPPED)
    gen = OnnxGenerator(SHIPPED, manifest, threads=1)
    contract = Contract.from_manifest(manifest.decoding)
    tuples = read_prototypes(SHIPPED / "prototypes.txt", 2)[:12]
    protos = pad_tuples(tuples, 2, len(tuples), contract.prototype_width).numpy()
    ids = np.arange(len(tuples), dtype=np.int64)
    z = prior_z(contract, 0, ids)
    for strategy, beam in (("greedy", 1), ("beam", 3)):
        c = replace(contract, beam_width=beam)
        cpu = decode(gen.stepper(), c, protos, z, search_for(strategy, beam_width=beam), ids)
        bound = decode(OnnxCudaStepper(gen, ("cpu", 0)), c, protos, z,
                       search_for(strategy, beam_width=beam), ids)
        np.testing.assert_array_equal(cpu[0], bound[0])
        np.testing.assert_allclose(cpu[1], bound[1], rtol=0, atol=1e-6)


def test_env_json_reports_the_machine():
    proc = _cli("env", "--json", env={"CUDA_VISIBLE_DEVICES": ""})
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert info["torch"]["version"] == torch.__version__
    assert info["torch"]["cuda"] == torch.version.cuda
    assert info["gpus"] == []                 # none visible
    assert info["device"]["auto"] == "cpu"
    assert info["device"]["CUDA_VISIBLE_DEVICES"] == ""
    ort = info["onnxruntime"]
    assert ort["loading"]["CPUExecutionProvider"] == "ok"
    assert set(ort["loading"]) == set(ort["available"])
    assert info["kenlm"]["module"].startswith("kenlm")
    assert info["cpu"]["cores"] >= 1 and isinstance(info["cpu"]["flags"], list)
