"""The README's Python block runs as written (in a temporary folder, on the shipped
numbers set), and ``import compgen`` imports no torch and changes no environment."""

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)


def test_import_compgen_is_light_and_changes_no_environment():
    code = ("import os, sys; before = dict(os.environ); import compgen; "
            "assert dict(os.environ) == before, 'environment changed'; "
            "heavy = [m for m in ('torch', 'polars', 'onnxruntime') if m in sys.modules]; "
            "assert not heavy, heavy; assert callable(compgen.geca)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr


def test_readme_python_block_runs(tmp_path):
    blocks = python_blocks()
    assert blocks, "README.md has no python block"
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for block in blocks:
        proc = subprocess.run([sys.executable, "-c", block], cwd=tmp_path, capture_output=True,
                              text=True, env=env, timeout=900, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "numbers.pt").is_file()
