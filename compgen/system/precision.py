"""Training precision: fp32, or bf16 autocast where the CPU has bf16 units; sampling
precision of an export: fp32 (the default), bf16 or int8, opt-in.

bf16 matmuls pay only on CPUs with AMX or AVX512-BF16; elsewhere torch emulates them and
training gets slower, so ``auto`` picks bf16 only where those units exist, and forcing
``bf16`` on a CPU without them is refused. Weights, optimizer and checkpoint stay fp32.
Sampling in bf16 (TorchScript; the C++ runner and the torch backend, compiled by AOTInductor)
is refused the same way; int8 (ONNX Runtime's int8 kernels) needs no special units.
The flags are read from /proc/cpuinfo, or from the file ``$COMPGEN_CPUINFO`` names (to
run as on another CPU, e.g. to check the refusal on a machine that has the units).
"""

from __future__ import annotations

import os
from pathlib import Path

from compgen.errors import SettingError

PRECISIONS = ("auto", "fp32", "bf16")
BF16_FLAGS = ("amx_bf16", "avx512_bf16")
# sampling precision -> the backends that run it
SAMPLE_PRECISIONS = {"fp32": ("onnx", "torchscript", "cpp", "torch"),
                     "bf16": ("torchscript", "cpp", "torch"), "int8": ("onnx",)}


# torch's bf16 CPU kernels (oneDNN) need one of these sets even to emulate bf16 without
# bf16 units; an AVX2-only CPU computes no bf16 at all
BF16_EMULATION_FLAGS = (("avx512bw", "avx512vl", "avx512dq"), ("avx_ne_convert",))


def cpu_flags(cpuinfo: Path | None = None) -> set[str]:
    """The CPU flags of /proc/cpuinfo (or of the file ``$COMPGEN_CPUINFO`` names)."""
    if cpuinfo is None:
        cpuinfo = Path(os.environ.get("COMPGEN_CPUINFO") or "/proc/cpuinfo")
    try:
        text = cpuinfo.read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def cpu_has_bf16(cpuinfo: Path | None = None) -> bool:
    """True when the CPU flags list AMX-BF16 or AVX512-BF16."""
    return any(flag in cpu_flags(cpuinfo) for flag in BF16_FLAGS)


def cpu_computes_bf16(cpuinfo: Path | None = None) -> bool:
    """True when torch can run bf16 here at all, with bf16 units or emulated."""
    flags = cpu_flags(cpuinfo)
    return bool(flags & set(BF16_FLAGS)) or any(set(group) <= flags
                                                for group in BF16_EMULATION_FLAGS)


def resolve_precision(requested: str, option: str = "`precision`") -> str:
    """``auto`` | ``fp32`` | ``bf16`` -> the precision to train in (``fp32`` or ``bf16``)."""
    if requested not in PRECISIONS:
        raise SettingError(f"{option} must be one of {', '.join(PRECISIONS)} (got {requested!r})")
    if requested == "auto":
        return "bf16" if cpu_has_bf16() else "fp32"
    if requested == "bf16" and not cpu_has_bf16():
        raise _no_bf16_units(option, "fp32 or auto")
    return requested


def _no_bf16_units(option: str, instead: str) -> SettingError:
    return SettingError(f"{option} bf16: this CPU has no bf16 units (no "
                        f"{' or '.join(BF16_FLAGS)} in the CPU flags); use `precision` {instead}")


def check_sample_precision(precision: str, backend: str) -> None:
    """Refuse a sampling precision the backend or the CPU cannot run."""
    if precision not in SAMPLE_PRECISIONS:
        raise SettingError(f"`precision` {precision}: unknown (valid: "
                           f"{', '.join(SAMPLE_PRECISIONS)})")
    backends = SAMPLE_PRECISIONS[precision]
    if backend not in backends:
        raise SettingError(f"`precision` {precision} runs on `backend` {' or '.join(backends)} "
                           f"(not {backend})")
    if precision == "bf16" and not cpu_has_bf16():
        raise SettingError(f"`precision` bf16: this CPU has no bf16 units (no "
                           f"{' or '.join(BF16_FLAGS)} in the CPU flags); use `precision` fp32 "
                           "or int8 (`backend` onnx)")
