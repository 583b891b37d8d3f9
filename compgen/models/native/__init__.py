"""The training step loops compiled for this machine (C++ in this folder).

The LSTM and decoder loops of generator training run thousands of small steps per update;
in Python each step is a dozen separate tensor operations, each with its own pass over
memory and its own interpreter overhead. The C++ loops here do the same computation with
each step's element-wise work fused into one vectorised pass. They are built once per
machine with ``torch.utils.cpp_extension`` (g++ and ninja; ``-march=native``) into
``~/.cache/compgen/native/<key>/`` (key: the sources and where they are, the torch version
and the CPU flags; the folder because the build file names the sources by path, so two
checkouts sharing one folder would rebuild it for each other). Where they cannot be built
the Python loops run instead (same results up to float rounding; ``loops()`` returns None
and says why once).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import torch

from compgen.system import cache

SOURCES = ("bindings.cpp", "lstm_loops.cpp", "decoder_loops.cpp")
HEADERS = ("linear.h", "pointwise.h")
_HERE = Path(__file__).resolve().parent
_loaded: dict[str, object] = {}


def _cache_root() -> Path:
    return cache.store("native")


def _cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _key() -> str:
    h = hashlib.sha256(f"{torch.__version__} {sys.version_info[:2]} {_cpu_flags()}".encode())
    h.update(str(_HERE).encode())
    for name in SOURCES + HEADERS:
        h.update((_HERE / name).read_bytes())
    return h.hexdigest()[:16]


def loops():
    """The compiled module (its loops: ``loop_for``), building it on first use
    (~30 s); None when it cannot be built or ``COMPGEN_NATIVE=0``."""
    if "module" in _loaded:
        return _loaded["module"]
    module = None
    if os.environ.get("COMPGEN_NATIVE", "1") != "0":
        try:
            module = _build()
        except (OSError, RuntimeError, ImportError, subprocess.SubprocessError) as exc:
            # no compiler, no ninja, a failed build: the Python loops
            print(f"note: the compiled training loops are not available ({_first_line(exc)}); "
                  "training runs the Python loops", file=sys.stderr)
    _loaded["module"] = module
    return module


def loop_for(module, name: str, dtype: torch.dtype):
    """The compiled entry ``name`` (``lstm_forward``, ``decoder_backward``, ...) whose
    products run in ``dtype`` (fp32 or bf16): each loop is compiled once per dtype."""
    if dtype not in (torch.float32, torch.bfloat16):
        raise TypeError(f"{name}: fp32 or bf16 products expected, not {dtype}")
    return getattr(module, f"{name}_{'bf16' if dtype == torch.bfloat16 else 'fp32'}")


@contextmanager
def denormals_flushed(module):
    """Subnormal floats flushed to zero in every torch thread while the block runs (see
    ``flush_denormals`` in bindings.cpp); nothing when ``module`` is None."""
    if module is None:
        yield
        return
    was = module.flush_denormals(True)
    try:
        yield
    finally:
        module.flush_denormals(was)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[-1][:200] if text else type(exc).__name__


def _build():
    # start-up: the C++ build tools load only to build the loops
    from torch.utils.cpp_extension import load

    key = _key()
    folder = _cache_root() / key
    folder.mkdir(parents=True, exist_ok=True)
    # torch marks a build in progress with a ``lock`` file that a killed build leaves
    # behind, and every later load then waits for it forever. compgen's processes take an
    # flock first (the kernel drops it when its holder dies), so whoever holds it knows a
    # ``lock`` file there is stale.
    with open(folder.parent / f"{key}.flock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        (folder / "lock").unlink(missing_ok=True)
        library = folder / f"compgen_native_{key}.so"
        # a library that does not match the digest recorded when it was built is never
        # loaded: the whole build folder goes (its objects are as suspect) and is rebuilt
        if (library.exists() or library.is_symlink()) and not cache.verified(
                library, "the compiled training loops"):
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(mode=0o700)
        if not library.is_file():
            print(f"building the compiled training loops for this CPU (once, ~1 min) in "
                  f"{folder}", file=sys.stderr)
        module = load(name=f"compgen_native_{key}", sources=[str(_HERE / s) for s in SOURCES],
                    build_directory=str(folder), verbose=False,
                    extra_cflags=["-O3", "-march=native", "-mprefer-vector-width=512",
                                  "-fno-math-errno", "-fno-trapping-math", "-fopenmp"],
                    extra_ldflags=["-fopenmp"])
        cache.record(library)   # what was just verified or built, under the lock
        return module
