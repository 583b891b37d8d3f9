"""What every command module shares: the Typer app, the consoles, common options."""

from __future__ import annotations

import functools
import re
import resource
from pathlib import Path

import typer
from rich.console import Console

from compgen import __version__
from compgen.cli.commands import LazyGroup, every_command
from compgen.device import DEVICE_HELP
from compgen.errors import UserError, name_settings

# cls: the commands are listed from compgen.cli.commands, imported one by one as they run;
# add_completion: the program answers shell completion (scripts/shell/compgen.sh asks it)
app = typer.Typer(cls=LazyGroup, no_args_is_help=True, pretty_exceptions_enable=False,
                  add_completion=True, rich_markup_mode=None,
                  help="Compositional data augmentation: GECA, R&R generators, KenLM.")
# soft_wrap: a summary line stays one line in a pipe or a log (paths make them long)
console = Console(width=max(120, Console().width), soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def _print_version(value: bool) -> None:
    if value:
        console.print(f"compgen {__version__}", highlight=False, markup=False)
        raise typer.Exit()


@app.callback()
def _global_options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True,
                                 help="print the version and exit"),
) -> None:
    """Compositional data augmentation: GECA, R&R generators, KenLM."""


# Options whose value may be left out, and the value they take then (Typer's parser has no
# optional values): `--seeds 0-4 --ray` starts a local Ray cluster.
OPTIONAL_VALUES = {"--ray": "local"}


def fill_optional_values(args: list[str]) -> list[str]:
    """``args`` with the implied value after an option of ``OPTIONAL_VALUES`` that is
    last or followed by another option (``--ray --seeds 0`` -> ``--ray local --seeds 0``)."""
    out: list[str] = []
    for i, word in enumerate(args):
        if word == "--":
            return out + args[i:]
        out.append(word)
        following = args[i + 1] if i + 1 < len(args) else None
        if word in OPTIONAL_VALUES and (following is None or following.startswith("-")):
            out.append(OPTIONAL_VALUES[word])
    return out


def ray_address(value: str) -> str | None:
    """``--ray``'s value -> the address Ray connects to; None starts a cluster here."""
    if value in ("", "local"):
        return None
    if value == "auto" or re.fullmatch(r"(ray://)?[A-Za-z0-9_.\-]+:\d{1,5}", value):
        return value
    raise UserError(f"--ray {value}: expected local (start a cluster here; also --ray alone), "
                    "auto (the cluster this machine belongs to), HOST:PORT or ray://HOST:PORT")


DataDir = typer.Option(None, "--data-dir", help="data folder (default: $COMPGEN_DATA or ~/.cache/compgen/data)")
XField = typer.Option(None, "--x-field", help="JSONL/CSV/Parquet/TSV data: the input field (default: x, input, source or src); a TSV's first line is then its header")
YField = typer.Option(None, "--y-field", help="JSONL/CSV/Parquet/TSV data: the output field (default: y, output, target or tgt); a TSV's first line is then its header")
Columns = typer.Option(None, "--columns", help="names of a header-less TSV's columns, comma-separated (e.g. id,input,output); its first line is then data")
DeviceOption = typer.Option(None, "--device", help=DEVICE_HELP)


def fields_of(x_field: str | None, y_field: str | None, columns: str | None):
    """The fields ``--x-field/--y-field/--columns`` name (see compgen.data.files)."""
    # start-up: `compgen --help` loads no polars
    from compgen.data.files import Fields, parse_columns

    return Fields(x_field, y_field, parse_columns(columns))


def checkpoint_kind(path: Path) -> str:
    """The kind stored in a checkpoint: "recombine" (generator), "seq2seq" (predictor)."""
    # start-up: `compgen --help` loads no torch or polars
    from compgen.training.checkpoint import load_checkpoint

    return load_checkpoint(path).kind


def out_of_memory(exc: BaseException) -> str:
    """One line for a failed allocation: the size asked for when known, the address-space
    limit (ulimit -v) and the peak memory of this process."""
    asked = re.search(r"allocate (\d+) bytes", str(exc))
    need = f"an allocation of {_size(int(asked.group(1)))} failed" if asked else "out of memory"
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    where_limit = (f"the address-space limit (ulimit -v) is {_size(limit)}"
                   if limit != resource.RLIM_INFINITY else "no address-space limit is set")
    return (f"{need} (peak use {_size(peak)}; {where_limit}); free memory, raise the limit "
            "or use a smaller data set or model")


def _size(n: int) -> str:
    for unit in ("bytes", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:,} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


# the settings whose flag is not ``--`` + the setting's name with dashes
FLAGS = {"pool_size": "--pool", "mirror": "--from", "max_prototypes": "--prototypes",
         "discount_fallback": "--discount_fallback"}


def flag_of(setting: str) -> str:
    """The command-line flag of a library setting: ``beam_width`` -> ``--beam-width``
    (every command names its options after the settings they set, but those of ``FLAGS``)."""
    return FLAGS.get(setting) or "--" + setting.replace("_", "-")


def option_names(group, imported_only: bool = False) -> set[str]:
    """The parameter names of every option of every command under ``group`` (with
    ``imported_only``, of the commands whose modules are imported), and the off switches
    of its on/off flags by their own names (``all_prototypes``: --all-prototypes sets
    ``rare_prototypes`` off)."""
    names: set[str] = set()
    for command in every_command(group, imported_only).values():
        if isinstance(command, LazyGroup):
            names |= option_names(command, imported_only)
        else:
            names |= {param.name for param in command.params if param.name}
            names |= {flag.removeprefix("--").replace("-", "_") for param in command.params
                      for flag in getattr(param, "secondary_opts", ()) if flag.startswith("--")}
    return names


class KnownSettings:
    """The settings that are options of some command under ``group`` (or in ``FLAGS``),
    for ``in``: looked up first among the commands whose modules are imported (the running
    one's), among every command only for a name they lack (that imports every command)."""

    def __init__(self, group) -> None:
        self.group = group
        self.imported = option_names(group, imported_only=True) | set(FLAGS)
        self.every: set[str] | None = None

    def __contains__(self, name: str) -> bool:
        if name in self.imported:
            return True
        if self.every is None:
            self.every = option_names(self.group)
        return name in self.every


def with_flags(template: str, known) -> str:
    """``template`` (a SettingError's, or a library log line) with each `setting` of
    ``known`` written as its flag; a backquoted word that no command has as an option
    (text quoted from a user's program, say) stays as it is."""
    return name_settings(template, lambda name: flag_of(name) if name in known else f"`{name}`")


def flags_in(error, group) -> str:
    """A SettingError's message with each setting written as its flag."""
    return with_flags(error.template, KnownSettings(group))


@functools.cache
def _known_settings() -> KnownSettings:
    return KnownSettings(typer.main.get_command(app))


def log_with_flags(console_to: Console):
    """A library ``log`` callback that prints each line with its `settings` written as
    the flags that set them (as ``flags_in`` does for errors)."""
    def log(line: str) -> None:
        console_to.print(with_flags(line, _known_settings()), highlight=False, markup=False)
    return log
