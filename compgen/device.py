"""Where compgen computes: one resolver for ``--device auto|cpu|cuda[:N]`` (and
``$COMPGEN_DEVICE``), and what torch and ONNX Runtime are given once it is resolved.

* ``auto`` is CUDA (the first GPU) when torch sees a GPU, else the CPU. Asking for CUDA
  where torch sees none is a ``UserError``: nothing falls back to the CPU silently.
* ONNX Runtime is asked for its CUDA provider only on a CUDA device; a session that did
  not get it is a ``UserError`` too (ONNX Runtime itself would run on the CPU and say so
  only in a banner printed to stdout, where samples go without ``-o``: sessions on a
  CUDA device are made with stdout pointed at stderr).
* Training on CUDA: bf16 autocast where the GPU computes bf16 (on the CPU, bf16 is decided
  from the CPU flags, ``compgen.system.precision``), TF32 matrix products when asked, batches
  copied from pinned memory without waiting.

The machine report of ``compgen env`` is in :mod:`compgen.cli.environment`.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from dataclasses import dataclass

from compgen.errors import SettingError
from compgen.system.precision import PRECISIONS, resolve_precision

DEVICE_ENV = "COMPGEN_DEVICE"
# what a machine whose GPUs torch could use has: the NVIDIA driver's files (ROCm: /dev/kfd)
GPU_DRIVER_FILES = ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd")
DEVICE_HELP = ("auto (CUDA when torch sees a GPU, else the CPU) | cpu | cuda[:N] "
               f"(default: ${DEVICE_ENV}, else auto)")
_SYNTAX = re.compile(r"(auto|cpu|cuda)(?::(\d+))?")


@dataclass(frozen=True)
class Device:
    type: str = "cpu"   # "cpu" | "cuda"
    index: int = 0

    def __str__(self) -> str:
        return "cpu" if self.type == "cpu" else f"cuda:{self.index}"

    @property
    def cuda(self) -> bool:
        return self.type == "cuda"

    @property
    def torch(self):
        # start-up: `compgen --help` loads no torch
        import torch

        return torch.device(str(self))

    @property
    def ort_provider(self) -> str:
        """The ONNX Runtime provider this device asks for (also the ORT caches' key)."""
        return "CUDAExecutionProvider" if self.cuda else "CPUExecutionProvider"

    def ort_providers(self) -> list:
        if not self.cuda:
            return ["CPUExecutionProvider"]
        # the CPU provider stays listed for the few nodes the CUDA provider has no kernel for
        return [("CUDAExecutionProvider", {"device_id": str(self.index)}), "CPUExecutionProvider"]


CPU = Device("cpu")


def parse_device(text: str, option: str = "`device`") -> Device | None:
    """``auto`` -> None, ``cpu`` / ``cuda`` / ``cuda:N`` -> Device; anything else is a
    SettingError naming ``option``. Syntax only: nothing is asked of torch."""
    match = _SYNTAX.fullmatch(text.strip().lower())
    if match is None or (match.group(2) is not None and match.group(1) != "cuda"):
        raise SettingError(f"{option} {text}: unknown device (valid: auto, cpu, cuda, cuda:N)")
    kind, index = match.group(1), match.group(2)
    if kind == "auto":
        return None
    return Device(kind, int(index or 0))


def max_threads() -> int:
    """The most CPU threads a job may ask for: 8 per core (at least 64). A million threads
    grew ONNX Runtime's pool until the kernel killed it, and aborted the C++ runner."""
    return max(64, 8 * (os.cpu_count() or 1))


def check_threads(threads: int | None, option: str = "`threads`") -> None:
    if threads is not None and not 1 <= threads <= max_threads():
        raise SettingError(f"{option} {threads}: must be from 1 to {max_threads()} (8 per "
                           "core of this machine, at least 64)")


def resolve_device(requested: str | Device | None = None, option: str = "`device`",
                   auto_cpu: bool = False) -> Device:
    """The device to compute on: ``requested``, else ``$COMPGEN_DEVICE``, else ``auto``.
    ``auto_cpu``: the work runs on the CPU only (the C++ runner, reduced precision), so
    ``auto`` means the CPU; an explicit CUDA device is still checked and then refused by
    the work itself."""
    if isinstance(requested, Device):
        return _check(requested, option)
    if requested is None:
        env = os.environ.get(DEVICE_ENV, "").strip()
        requested, option = (env, DEVICE_ENV) if env else ("auto", option)
    device = parse_device(requested, option)
    if device is None:
        return Device("cuda") if not auto_cpu and _gpus() else CPU
    return _check(device, option)


def _gpus() -> int:
    """GPUs torch sees (0 with a CPU-only build of torch, or with none visible). Without a
    GPU driver on the machine torch could see none: the answer needs no torch import, which
    would be most of the start-up of a job that runs without torch (ONNX Runtime, C++)."""
    if "torch" not in sys.modules and not any(os.path.exists(p) for p in GPU_DRIVER_FILES):
        return 0
    # start-up: `compgen --help` loads no torch
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _check(device: Device, option: str) -> Device:
    if not device.cuda:
        return device
    count = _gpus()
    if count == 0:
        # start-up: `compgen --help` loads no torch
        import torch

        build = (f"a CPU-only build of torch {torch.__version__}" if torch.version.cuda is None
                 else f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no GPU")
        visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        hidden = f"; CUDA_VISIBLE_DEVICES={visible!r}" if visible is not None else ""
        raise SettingError(f"{option} {device}: no CUDA device here ({build}{hidden}); "
                           "use `device` cpu or auto")
    if device.index >= count:
        raise SettingError(f"{option} {device}: torch sees {count} GPU(s) (cuda:0..cuda:{count - 1})")
    return device


def as_device(device: str | Device | None) -> Device:
    """What the library layers take: None is the CPU (the caller resolved nothing)."""
    return CPU if device is None else resolve_device(device)


# ------------------------------------------------------------------ torch

def training_precision(requested: str, device: Device, option: str = "`precision`") -> str:
    """``auto`` | ``fp32`` | ``bf16`` -> ``fp32`` or ``bf16`` on ``device``: on the CPU
    from its flags (``compgen.system.precision``), on CUDA from what the GPU computes."""
    if not device.cuda:
        return resolve_precision(requested, option)
    if requested not in PRECISIONS:
        raise SettingError(f"{option} must be one of {', '.join(PRECISIONS)} (got {requested!r})")
    # start-up: `compgen --help` loads no torch
    import torch

    supported = torch.cuda.is_bf16_supported()
    if requested == "bf16" and not supported:
        raise SettingError(f"{option} bf16: {torch.cuda.get_device_name(device.index)} computes "
                           "no bf16; use `precision` fp32 or auto")
    return "bf16" if requested == "bf16" or (requested == "auto" and supported) else "fp32"


def autocast(device: Device, bf16: bool):
    """bf16 autocast on ``device`` (weights and gradients stay fp32), or nothing."""
    if not bf16:
        return contextlib.nullcontext()
    # start-up: `compgen --help` loads no torch
    import torch

    return torch.autocast(device.type, dtype=torch.bfloat16)


def use_tf32(device: Device, on: bool, option: str = "`tf32`") -> None:
    """TF32 matrix products and cuDNN kernels on CUDA (10 mantissa bits instead of 23),
    or - ``on`` False - full fp32 there: torch lets cuDNN (the LSTMs) use TF32 by default,
    which would make CUDA's fp32 greedy samples differ from the CPU's."""
    if on and not device.cuda:
        raise SettingError(f"{option}: TF32 is a CUDA setting; the device is {device}")
    if not device.cuda:
        return
    # start-up: `compgen --help` loads no torch
    import torch

    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def to_device(tensors, device: Device):
    """``tensors`` (a tuple) on ``device``: from pinned memory without waiting on CUDA."""
    if not device.cuda:
        return tensors
    target = device.torch
    return type(tensors)(t.pin_memory().to(target, non_blocking=True) for t in tensors)


def cpu_copy(tensor):
    """A CPU copy of ``tensor`` (checkpoints are written from these: loadable anywhere)."""
    return tensor.detach().to("cpu", copy=True).contiguous()


def cuda_out_of_memory(exc: BaseException) -> SettingError | None:
    """Advice, as one line, for a GPU that ran out of memory (torch or ONNX Runtime), or
    None when ``exc`` is something else."""
    text = str(exc)
    if type(exc).__name__ != "OutOfMemoryError" and not (
            "CUDA" in text and "out of memory" in text):
        return None
    asked = re.search(r"allocate ([\d.]+ [KMG]iB)", text)
    size = f" (asked for {asked.group(1)})" if asked else ""
    return SettingError(f"the GPU ran out of memory{size}; use a smaller `batch_size`, a "
                        "smaller model, or `device` cpu")


# ------------------------------------------------------------------ ONNX Runtime

@contextlib.contextmanager
def stdout_to_stderr():
    """Everything written to stdout meanwhile - by Python or by native code - goes to stderr."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def ort_session(model, options, device: Device):
    """An ``onnxruntime.InferenceSession`` of ``model`` (path or bytes) on ``device``; on
    CUDA a UserError when ONNX Runtime has no CUDA provider or could not load it."""
    # start-up: `compgen --help` loads no onnxruntime
    import onnxruntime as ort

    if not device.cuda:
        return ort.InferenceSession(model, options, providers=device.ort_providers())
    available = ort.get_available_providers()
    if "CUDAExecutionProvider" not in available:
        raise SettingError(f"`device` {device}: onnxruntime {ort.__version__} has no CUDA "
                           f"provider (it has {', '.join(available)}); pip install "
                           "'compgen[gpu]' (or `device` cpu)")
    with stdout_to_stderr():
        session = ort.InferenceSession(model, options, providers=device.ort_providers())
    used = session.get_providers()
    if "CUDAExecutionProvider" not in used:
        raise SettingError(f"`device` {device}: onnxruntime {ort.__version__} could not load "
                           f"its CUDA provider (it runs on {', '.join(used)}; the CUDA and "
                           "cuDNN libraries it needs: pip install 'compgen[gpu]'); or `device` cpu")
    return session


def describe_sessions(device: Device, sessions) -> str:
    """``cuda:0 (CUDAExecutionProvider, CPUExecutionProvider)``: the providers in use."""
    used: list[str] = []
    for session in sessions:
        used += [p for p in session.get_providers() if p not in used]
    return f"{device} ({', '.join(used)})"
