"""What every command module shares: the Typer app, the consoles, common options."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="Compositional data augmentation: GECA, R&R generators, KenLM.")
console = Console(width=max(120, Console().width))
err_console = Console(stderr=True)

DataDir = typer.Option(None, "--data-dir", help="data folder (default: $COMPGEN_DATA or ~/.cache/compgen/data)")


def checkpoint_kind(path: Path) -> str:
    """The kind stored in a checkpoint: "recombine" (generator), "seq2seq" (predictor)."""
    from compgen.train import load_checkpoint

    return load_checkpoint(path).kind
