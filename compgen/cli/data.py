"""`compgen data`: list, fetch and describe data sets."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from compgen.cli.common import Columns, DataDir, XField, YField, console, fields_of
from compgen.data import dataset_names
from compgen.data.dataset import open_dataset
from compgen.data.sources import default_data_dir, fetch
from compgen.data.stats import table_stats

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("list")
def data_list(data_dir: Path | None = DataDir) -> None:
    """Names of the data sets compgen knows (every SIGMORPHON language in the data folder)."""
    for name in dataset_names(data_dir):
        console.print(name)


@commands.command("fetch")
def data_fetch(
    name: str = typer.Argument(..., help="scan | sigmorphon | lm | cogs | geoquery"),
    mirror: Path | None = typer.Option(None, "--from", help="copy from this offline mirror instead of downloading"),
    data_dir: Path | None = DataDir,
) -> None:
    """Download a data set (or copy it from a mirror) and verify its sha256 sums."""
    target = data_dir or Path(__import__("os").environ.get("COMPGEN_DATA") or default_data_dir())
    written = fetch(name, target, mirror)
    console.print(f"{name}: {len(written)} files verified (sha256) into {target}")


@commands.command("stats")
def data_stats(name: str = typer.Argument(..., help="data set name, data file or folder of train/dev/test files"),
               data_dir: Path | None = DataDir, x_field: str | None = XField,
               y_field: str | None = YField, columns: str | None = Columns) -> None:
    """Counts, vocabulary sizes and lengths per split."""
    fields = fields_of(x_field, y_field, columns)
    stats = table_stats(open_dataset(name, data_dir, fields).table)
    table = Table(title=name)
    for col in stats.columns:
        table.add_column(col, justify="left" if col == "split" else "right")
    for row in stats.iter_rows():
        table.add_row(*[f"{v:,.1f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int)
                        else str(v) for v in row])
    console.print(table)
