"""What this machine offers compgen (``compgen env``): Python, torch and its CUDA, the
GPUs, the ONNX Runtime providers that really load (a tiny session is made on each; being
listed by ``get_available_providers`` is not enough: the CUDA provider is listed when its
libraries are missing too), KenLM, the CPU flags that choose kernels, and where
``--device auto`` would compute."""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import sys
from pathlib import Path

import numpy as np
import torch

from compgen import __version__
from compgen.device import DEVICE_ENV, resolve_device
from compgen.errors import UserError
from compgen.lm.kenlm_tools import find_kenlm_binaries
from compgen.system.precision import cpu_flags

# CPU flags that decide which kernels torch, ONNX Runtime and the compiled loops use
CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_bf16",
             "amx_int8", "avx_vnni", "avx_ne_convert")


def report() -> dict:
    return {
        "compgen": __version__,
        "python": {"version": platform.python_version(), "executable": sys.executable},
        "torch": {"version": torch.__version__, "cuda": torch.version.cuda,
                  "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
                  "cuda_available": torch.cuda.is_available()},
        "gpus": _gpus(),
        "onnxruntime": _onnxruntime(),
        "kenlm": _kenlm(),
        "cpu": _cpu(),
        "device": {"auto": str(resolve_device("auto")), DEVICE_ENV: os.environ.get(DEVICE_ENV),
                   "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")},
    }


def _gpus() -> list[dict]:
    if not torch.cuda.is_available():
        return []
    gpus = []
    for i in range(torch.cuda.device_count()):
        p = torch.cuda.get_device_properties(i)
        gpus.append({"index": i, "name": p.name, "memory_gib": round(p.total_memory / 2**30, 1),
                     "capability": f"{p.major}.{p.minor}",
                     "bf16": bool(torch.cuda.is_bf16_supported())})
    return gpus


def _package(*names: str) -> str | None:
    for name in names:
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _onnxruntime() -> dict:
    try:
        # optional: the report says whether onnxruntime loads
        import onnxruntime as ort
    except ImportError as exc:
        return {"version": None, "error": str(exc)}
    available = ort.get_available_providers()
    return {"version": ort.__version__,
            "package": _package("onnxruntime-gpu", "onnxruntime"),
            "available": available,
            "loading": {p: _try_provider(ort, p) for p in available}}


def _tiny_model() -> bytes:
    """y = x + x over a float vector: a graph every provider has a kernel for."""
    # optional: the report works without onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])
    graph = helper.make_graph([helper.make_node("Add", ["x", "x"], ["y"])], "tiny", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model.SerializeToString()


@contextlib.contextmanager
def _silenced():
    """ONNX Runtime's banners and log lines about a provider that fails (stdout and stderr,
    Python's and native code's) go nowhere: the report says what failed."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        with open(os.devnull, "w") as sink, contextlib.redirect_stdout(sink), \
                contextlib.redirect_stderr(sink):
            yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def _try_provider(ort, provider: str) -> str:
    """"ok" when a session on ``provider`` is made and keeps it, else why not."""
    options = ort.SessionOptions()
    options.log_severity_level = 4
    try:
        with _silenced():
            session = ort.InferenceSession(_tiny_model(), options, providers=[provider])
            session.run(None, {"x": np.ones(4, np.float32)})
    except Exception as exc:  # noqa: BLE001 (onnxruntime raises bare Exception subclasses)
        return f"fails: {str(exc).strip().splitlines()[0][:160] if str(exc).strip() else exc!r}"
    used = session.get_providers()
    return "ok" if provider in used else f"fell back to {', '.join(used)}"


def _kenlm() -> dict:
    out: dict = {"module": _package("kenlm")}
    try:
        # optional: kenlm's Python module builds from source and may be missing
        import kenlm  # noqa: F401
    except ImportError as exc:
        out["module"] = f"missing ({exc})"

    try:
        out["lmplz"] = str(find_kenlm_binaries()[0])
    except UserError as exc:
        out["lmplz"] = f"missing ({exc})"
    return out


def _cpu() -> dict:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        text = ""
    model = next((line.split(":", 1)[1].strip() for line in text.splitlines()
                  if line.startswith("model name")), None)
    flags = cpu_flags()
    return {"model": model, "cores": len(os.sched_getaffinity(0)),
            "flags": [f for f in CPU_FLAGS if f in flags]}


def lines(info: dict) -> list[str]:
    """The report as ``key: value`` lines for people."""
    torch, ort, gpus = info["torch"], info["onnxruntime"], info["gpus"]
    out = [f"compgen {info['compgen']}",
           f"python {info['python']['version']} ({info['python']['executable']})",
           f"torch {torch['version']}, CUDA {torch['cuda'] or 'none (CPU build)'}"
           + (f", cuDNN {torch['cudnn']}" if torch["cudnn"] else "")]
    out += [f"gpu {g['index']}: {g['name']}, {g['memory_gib']} GiB, compute {g['capability']}"
            f"{', bf16' if g['bf16'] else ''}" for g in gpus] or ["gpus: none that torch sees"]
    if ort.get("version"):
        out.append(f"onnxruntime {ort['version']} ({ort['package']}): "
                   + "; ".join(f"{p} {state}" for p, state in ort["loading"].items()))
    else:
        out.append(f"onnxruntime: {ort.get('error')}")
    out.append(f"kenlm: module {info['kenlm']['module']}, lmplz {info['kenlm']['lmplz']}")
    cpu = info["cpu"]
    out.append(f"cpu: {cpu['model']}, {cpu['cores']} cores, flags {' '.join(cpu['flags']) or '-'}")
    dev = info["device"]
    out.append(f"--device auto -> {dev['auto']}"
               + "".join(f", {k}={v!r}" for k, v in dev.items() if k != "auto" and v is not None))
    return out
