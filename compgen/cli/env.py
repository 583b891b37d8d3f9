"""`compgen env`: what this machine offers compgen (Python, torch, CUDA, GPUs, ONNX
Runtime providers that load, KenLM, CPU flags)."""

from __future__ import annotations

import json

import typer

from compgen.cli.common import console
from compgen.cli.environment import lines, report

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("env")
def env_cmd(
    as_json: bool = typer.Option(False, "--json", help="one JSON object instead of lines"),
) -> None:
    """Report the Python, torch, CUDA, GPUs, ONNX Runtime providers, KenLM and CPU flags."""
    info = report()
    if as_json:
        print(json.dumps(info, indent=2))
        return
    for line in lines(info):
        console.print(line, highlight=False, markup=False, soft_wrap=True)
