"""`compgen inspect`: what a checkpoint or export folder holds."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from compgen.cli.common import app, console


@app.command("inspect")
def inspect_cmd(
    path: Path = typer.Argument(..., help="checkpoint (.pt) or export folder"),
    as_json: bool = typer.Option(False, "--json", help="print one JSON object instead of sections"),
) -> None:
    """Kind, config, vocabulary, training state (checkpoints) or parity figures (exports)."""
    from compgen.inspection import describe

    sections = describe(path)
    if as_json:
        console.print(json.dumps(sections, indent=1, default=str), highlight=False, markup=False,
                      soft_wrap=True)
        return
    for title, body in sections.items():
        console.print(f"[{title}]", highlight=False, markup=False)
        items = body.items() if isinstance(body, dict) else [("", ", ".join(map(str, body)))]
        for key, value in items:
            text = json.dumps(value, default=str) if isinstance(value, dict | list) else str(value)
            console.print(f"  {key}: {text}" if key else f"  {text}", highlight=False, markup=False,
                          soft_wrap=True)
