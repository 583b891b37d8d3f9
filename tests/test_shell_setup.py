"""`compgen` in an activated venv (scripts/shell/compgen.sh, hooked into .venv/bin/activate
by scripts/setup.sh): the project's commands go to the program, bash's builtin of the same
name keeps working for completion scripts, and the program completes its commands."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compgen import __version__

ROOT = Path(__file__).resolve().parents[1]
SHELL_SCRIPT = ROOT / "scripts" / "shell" / "compgen.sh"


@pytest.fixture
def venv(tmp_path):
    """A folder standing for the venv: bin/compgen runs this checkout's CLI."""
    program = tmp_path / "bin" / "compgen"
    program.parent.mkdir()
    program.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m compgen "$@"\n')
    program.chmod(0o755)
    return tmp_path


def bash(script: str, venv: Path) -> list[str]:
    proc = subprocess.run(["bash", "-c", f'. "{SHELL_SCRIPT}"\n{script}'], capture_output=True,
                          text=True, env={**os.environ, "VIRTUAL_ENV": str(venv)}, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_routes_commands_to_the_program_and_options_to_the_builtin(venv):
    out = bash('compgen --version\ncompgen -W "alpha beta gamma" -- al\ncomplete -p compgen', venv)
    assert out == [f"compgen {__version__}", "alpha",
                   "complete -o default -F _compgen_project_complete compgen"]


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_bash_completes_commands_and_options(venv):
    out = bash('COMP_WORDS=(compgen train ""); COMP_CWORD=2; _compgen_project_complete compgen\n'
               'echo "${COMPREPLY[*]}"\n'
               'COMP_WORDS=(compgen sample x --stra); COMP_CWORD=3; _compgen_project_complete compgen\n'
               'echo "${COMPREPLY[*]}"', venv)
    import typer.main

    from compgen.cli import app
    from compgen.cli.commands import every_command

    train = every_command(typer.main.get_command(app))["train"]
    assert set(out[0].split()) == set(every_command(train)) and out[1] == "--strategy"


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_zsh_routes_commands_to_the_program(venv):
    proc = subprocess.run(["zsh", "-c", f'. "{SHELL_SCRIPT}"; compgen --version'],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "VIRTUAL_ENV": str(venv)})
    assert proc.returncode == 0 and proc.stdout.strip() == f"compgen {__version__}", proc.stderr


def test_setup_hooks_the_script_into_activate_once():
    text = (ROOT / "scripts" / "setup.sh").read_text()
    assert "scripts/shell/compgen.sh" in text and 'grep -qF "# compgen shell set-up"' in text
