"""What every command module shares: the Typer app, the consoles, common options."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

# add_completion: the program answers shell completion (scripts/shell/compgen.sh asks it)
app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=True,
                  rich_markup_mode=None,
                  help="Compositional data augmentation: GECA, R&R generators, KenLM.")
console = Console(width=max(120, Console().width))
err_console = Console(stderr=True)

def _print_version(value: bool) -> None:
    if value:
        from compgen import __version__

        console.print(f"compgen {__version__}", highlight=False, markup=False)
        raise typer.Exit()


@app.callback()
def _global_options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """Compositional data augmentation: GECA, R&R generators, KenLM."""


DataDir = typer.Option(None, "--data-dir", help="data folder (default: $COMPGEN_DATA or ~/.cache/compgen/data)")


def checkpoint_kind(path: Path) -> str:
    """The kind stored in a checkpoint: "recombine" (generator), "seq2seq" (predictor)."""
    from compgen.checkpoint import load_checkpoint

    return load_checkpoint(path).kind
