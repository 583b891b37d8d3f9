"""``compgen ARGS`` as its own process, as a user runs it (``python -m compgen`` from this
checkout, in it unless ``cwd`` says otherwise, one torch thread), and the one-error-line check of its outcome."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compgen(*args, cwd=None, env=None, timeout=900) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **(env or {})}
    return subprocess.run([sys.executable, "-m", "compgen", *map(str, args)], capture_output=True,
                          text=True, env=full_env, cwd=cwd or ROOT, check=False, timeout=timeout)


def one_error_line(proc: subprocess.CompletedProcess, *needles) -> str:
    """The process ended with exit status 2 and one ``error: ...`` line holding ``needles``."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-2000:]
    for needle in needles:
        assert str(needle) in lines[0], lines[0]
    return lines[0]
