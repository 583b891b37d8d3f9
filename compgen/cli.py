"""The ``compgen`` command line. Thin: every command parses options and calls a library
function that the tests call too. User mistakes print one ``error:`` line, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from compgen.errors import UserError

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="Compositional data augmentation: GECA, R&R generators, KenLM.")
console = Console(width=max(120, Console().width))
err_console = Console(stderr=True)

DataDir = typer.Option(None, "--data-dir", help="data folder (default: $COMPGEN_DATA or ~/.cache/compgen/data)")

# ---------------------------------------------------------------- data
data_app = typer.Typer(no_args_is_help=True, help="List, fetch and describe data sets.")
app.add_typer(data_app, name="data")


@data_app.command("list")
def data_list() -> None:
    """Names of the data sets compgen knows."""
    from compgen.data import dataset_names

    for name in dataset_names():
        console.print(name)


@data_app.command("fetch")
def data_fetch(
    name: str = typer.Argument(..., help="scan | sigmorphon | lm | cogs"),
    mirror: Optional[Path] = typer.Option(None, "--from", help="copy from this offline mirror instead of downloading"),
    data_dir: Optional[Path] = DataDir,
) -> None:
    """Download a data set (or copy it from a mirror) and verify its sha256 sums."""
    from compgen.data.sources import default_data_dir, fetch

    target = data_dir or Path(__import__("os").environ.get("COMPGEN_DATA") or default_data_dir())
    written = fetch(name, target, mirror)
    console.print(f"{name}: {len(written)} files verified (sha256) into {target}")


@data_app.command("stats")
def data_stats(name: str = typer.Argument(..., help="data set name or file"),
               data_dir: Optional[Path] = DataDir) -> None:
    """Counts, vocabulary sizes and lengths per split."""
    from compgen.data import load_dataset
    from compgen.data.stats import table_stats

    stats = table_stats(load_dataset(name, data_dir))
    table = Table(title=name)
    for col in stats.columns:
        table.add_column(col, justify="left" if col == "split" else "right")
    for row in stats.iter_rows():
        table.add_row(*[f"{v:,.1f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int)
                        else str(v) for v in row])
    console.print(table)


def main() -> None:
    try:
        app()
    except UserError as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)


if __name__ == "__main__":
    main()
