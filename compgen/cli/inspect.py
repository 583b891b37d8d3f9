"""`compgen inspect`: what a checkpoint or export folder holds."""

from __future__ import annotations

from pathlib import Path

import typer

from compgen.cli.common import console
from compgen.evaluation.inspection import describe, sections_text

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("inspect")
def inspect_cmd(
    path: Path = typer.Argument(..., help="checkpoint (.pt) or export folder"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object instead of sections"),
) -> None:
    """Kind, config, vocabulary, training state (checkpoints) or parity figures (exports)."""

    console.print(sections_text(describe(path), as_json), highlight=False, markup=False,
                  soft_wrap=True, end="")
