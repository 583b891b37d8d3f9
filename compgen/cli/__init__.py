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
from compgen.cli.common import app, check_outputs_first, err_console, out_of_memory
from compgen.cli.pipeline import parse_seeds
from compgen.errors import UserError

__all__ = ["app", "main", "parse_seeds"]


def main() -> None:
    import typer.main

    command = typer.main.get_command(app)
    check_outputs_first(command)
    try:
        command(prog_name="compgen")  # also under `python -m compgen`: completion and usage
    except UserError as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except MemoryError as exc:
        err_console.print(f"error: {out_of_memory(exc)}", markup=False, highlight=False,
                          soft_wrap=True)
        sys.exit(2)
    except RuntimeError as exc:   # torch's allocator reports a failed allocation this way
        if "not enough memory" not in str(exc) and "can't allocate memory" not in str(exc):
            raise
        err_console.print(f"error: {out_of_memory(exc)}", markup=False, highlight=False,
                          soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)


if __name__ == "__main__":
    main()
