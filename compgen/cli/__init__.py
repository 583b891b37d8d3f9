"""The ``compgen`` command line. Thin: every command parses options and calls a library
function that the tests call too. User mistakes print one ``error:`` line, exit 2.

One module per command group; importing it registers its commands on ``app``."""

from __future__ import annotations

import sys

from compgen.cli import (  # noqa: F401
    augment,
    data,
    evaluate,
    export,
    grammar,
    inspect,
    lm,
    pipeline,
    predict,
    presets,
    sample,
    stem_corrupt,
    train,
)
from compgen.cli.common import app, err_console
from compgen.cli.pipeline import parse_seeds
from compgen.errors import UserError

__all__ = ["app", "main", "parse_seeds"]


def main() -> None:
    try:
        app(prog_name="compgen")  # also under `python -m compgen`: completion and usage lines
    except UserError as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)


if __name__ == "__main__":
    main()
