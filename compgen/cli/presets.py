"""`compgen presets`: the bundled configurations, listed or shown."""

from __future__ import annotations

import typer

from compgen.cli.common import app, console


@app.command("presets")
def presets_cmd(
    name: str | None = typer.Argument(None, help="a preset to show in full (default: list them all)"),
) -> None:
    """List the bundled presets (name, kind, what they are), or print one as TOML."""
    from compgen.evaluation.inspection import preset_table, preset_text

    if name:
        console.print(preset_text(name), highlight=False, markup=False, soft_wrap=True, end="")
        return
    for row in preset_table():
        console.print(f"{row['name']:26s} {row['kind']:10s} {row['about']}", highlight=False,
                      markup=False, soft_wrap=True)
