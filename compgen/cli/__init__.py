"""The ``compgen`` command line. Thin: every command parses options and calls a library
function that the tests call too. User mistakes print one ``error:`` line, exit 2.

One module per command group; compgen.cli.commands lists every command and imports its
module only when it runs, so `compgen --help` imports none of them."""

from __future__ import annotations

import errno
import signal
import sys

import typer.main

from compgen.cli.common import app, err_console, fill_optional_values, flags_in, out_of_memory
from compgen.device import cuda_out_of_memory
from compgen.errors import SettingError, Terminated, UserError
from compgen.io import keep_torch_compiler_cache
from compgen.system.memory import address_space_limit, check_address_space

__all__ = ["app", "main"]


def _out_of_memory_exit(exc: BaseException) -> None:
    # plain write: with memory exhausted, rich's lazy imports would fail inside the handler
    exc.__traceback__ = None
    sys.stderr.write(f"error: {out_of_memory(exc)}\n")
    sys.exit(2)


def _raise_terminated(signum, frame) -> None:
    raise Terminated(signum)


def _gpu_out_of_memory_exit(exc: BaseException, command) -> None:
    advice = cuda_out_of_memory(exc)
    if advice is not None:
        exc.__traceback__ = None
        sys.stderr.write(f"error: {flags_in(advice, command)}\n")
        sys.exit(2)


def _disk_full_exit(where: str) -> None:
    sys.stderr.write(f"error: {where}no space left on the device (disk full or over quota)\n")
    sys.exit(2)


def main() -> None:
    # SIGTERM as an exception: staging folders and temporary files are removed and child
    # processes (the C++ runner, lmplz) killed on the way out, as for Ctrl-C
    signal.signal(signal.SIGTERM, _raise_terminated)
    # whichever path first imports torch's compiler (loading a checkpoint, exporting,
    # training), its cache folder goes to the user's cache, never the system temp dir
    keep_torch_compiler_cache()

    # each command gets its checks (compgen.cli.checks) as it loads
    command = typer.main.get_command(app)
    try:
        check_address_space()
        # prog_name: also under `python -m compgen`, for completion and usage
        command(args=fill_optional_values(sys.argv[1:]), prog_name="compgen")
    except UserError as exc:
        # a setting is named by the flag that sets it
        message = flags_in(exc, command) if isinstance(exc, SettingError) else str(exc)
        err_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except MemoryError as exc:
        _out_of_memory_exit(exc)
    except Terminated:
        sys.stderr.write("terminated\n")
        sys.exit(143)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
            raise
        exc.__traceback__ = None
        where = f"{exc.filename}: " if exc.filename else ""
        _disk_full_exit(where)
    except RuntimeError as exc:   # torch's allocator reports a failed allocation this way
        _gpu_out_of_memory_exit(exc, command)
        if "not enough memory" not in str(exc) and "can't allocate memory" not in str(exc):
            raise
        _out_of_memory_exit(exc)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)
    except BaseException as exc:
        _gpu_out_of_memory_exit(exc, command)   # ONNX Runtime's errors are no RuntimeError
        # Polars writing Parquet (GECA's spill, outputs) reports a full disk as a
        # ComputeError holding the OS error, not as an OSError
        if "(os error 28)" in str(exc) or "(os error 122)" in str(exc):
            exc.__traceback__ = None
            _disk_full_exit("")
        # Polars reports a failed allocation under a limit as a Rust panic (PanicException,
        # a BaseException) whose text does not say memory
        if type(exc).__name__ != "PanicException" or address_space_limit() is None:
            raise
        _out_of_memory_exit(exc)


if __name__ == "__main__":
    main()
