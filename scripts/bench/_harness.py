"""What the benchmarks of this folder share: the machine's description (CPU model and
flags, load average), the base commit's tree that side-by-side runs compare against (a
detached git worktree) and its environment, the alternating order of the two trees, and
imports that work in a base tree from before the package's modules moved.

Benchmarks import it as ``_harness`` (their folder is first on ``sys.path`` when run as
``python scripts/bench/NAME.py``); it imports nothing of ``compgen``, so a worker running
under a base tree's PYTHONPATH can use it too.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def _field(name: str) -> str | None:
    for line in _cpuinfo().splitlines():
        if line.startswith(name):
            return line.split(":", 1)[1].strip()
    return None


def cpu_flags(wanted: tuple[str, ...]) -> str:
    """The CPU flags among ``wanted`` the machine has, in /proc/cpuinfo's order, as one
    string (the processor's name where /proc/cpuinfo is missing)."""
    flags = _field("flags")
    if flags is None:
        return platform.processor() or "unknown"
    return " ".join(f for f in flags.split() if f in wanted)


def cpu_flag_list(wanted: tuple[str, ...]) -> list[str]:
    """The CPU flags among ``wanted`` the machine has, in ``wanted``'s order."""
    have = set((_field("flags") or "").split())
    return [f for f in wanted if f in have]


def cpu_model(missing: str | None = None) -> str:
    """The CPU's model name (``missing``, else the processor's name, where unknown)."""
    return _field("model name") or missing or platform.processor() or "unknown"


def load_average(digits: int = 2) -> str:
    """The 1, 5 and 15 minute load averages, e.g. ``1.52 1.20 0.98``."""
    return " ".join(f"{x:.{digits}f}" for x in os.getloadavg())


def base_tree(rev: str, where: Path | None = None) -> Path:
    """A detached worktree of ``rev`` at ``where`` (default a folder of the temporary
    directory named after ``rev``), made once and reused."""
    tree = where or Path(tempfile.gettempdir()) / f"compgen-bench-base-{rev}"
    if not (tree / "compgen").is_dir():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), rev],
                       check=True, capture_output=True)
    return tree


def remove_tree(tree: Path) -> None:
    """Remove a worktree ``base_tree`` made (and git's record of it)."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                   check=False, capture_output=True)


def tree_env(tree: Path, **extra: str) -> dict[str, str]:
    """This process's environment with ``tree``'s package first on the import path."""
    return {**os.environ, "PYTHONPATH": str(tree), **extra}


def alternating(names: list[str], turn: int) -> list[str]:
    """``names`` in order on even turns and reversed on odd ones, so that neither tree
    always runs first (a machine warming up or getting busier favours no one)."""
    return list(names) if turn % 2 == 0 else list(reversed(names))


class _TreeOnly(importlib.abc.MetaPathFinder):
    """Finds the submodules of a package in the package's own folder or nowhere: an
    editable install of another checkout (its finder runs after the path finder) must not
    fill in a module the tree under measurement lacks, e.g. a base tree from before a
    module moved."""

    def __init__(self, package: str):
        self.prefix = package + "."

    def find_spec(self, fullname, path, target=None):
        if not fullname.startswith(self.prefix):
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return spec


def import_only_from_tree(package: str = "compgen") -> None:
    """From now on, import ``package``'s submodules from the folder it was imported from
    only (idempotent)."""
    if not any(isinstance(f, _TreeOnly) for f in sys.meta_path):
        sys.meta_path.insert(0, _TreeOnly(package))


def import_moved(*paths: str) -> ModuleType:
    """The first of ``paths`` that imports from the tree on the import path: a module's
    path in this tree first, then the path it had in older trees (a worker runs under
    either)."""
    import_only_from_tree(paths[0].partition(".")[0])
    for path in paths[:-1]:
        try:
            return importlib.import_module(path)
        except ModuleNotFoundError as err:
            if not (err.name and path.startswith(err.name)):
                raise   # the module exists but something it imports is missing
    return importlib.import_module(paths[-1])
