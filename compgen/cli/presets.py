"""`compgen presets`: the bundled configurations, listed or shown."""

from __future__ import annotations

import typer

from compgen.cli.common import console
from compgen.evaluation.inspection import preset_table, preset_text

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("presets")
def presets_cmd(
    name: str | None = typer.Argument(None, help="a preset to show in full (default: list them all)"),
) -> None:
    """List the bundled presets (name, kind, what they are), or print one as TOML."""
    if name:
        console.print(preset_text(name), highlight=False, markup=False, soft_wrap=True, end="")
        return
    rows = preset_table()
    # columns as wide as their longest entry
    name_width = max(len(row["name"]) for row in rows)
    kind_width = max(len(row["kind"]) for row in rows)
    for row in rows:
        console.print(f"{row['name']:{name_width}s} {row['kind']:{kind_width}s} {row['about']}",
                      highlight=False, markup=False, soft_wrap=True)
