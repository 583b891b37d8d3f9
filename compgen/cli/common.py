"""What every command module shares: the Typer app, the consoles, common options."""

from __future__ import annotations

import functools
import re
import resource
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console

from compgen import __version__
from compgen.decoding.random_stream import check_seed
from compgen.device import DEVICE_HELP, check_threads
from compgen.errors import UserError, name_settings
from compgen.io import check_output, refuse_overwriting_inputs
from compgen.training.numeric_options import NUMERIC_OPTIONS, check_number

# add_completion: the program answers shell completion (scripts/shell/compgen.sh asks it)
app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=True,
                  rich_markup_mode=None,
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


# Options that name something the command writes: checked before the command starts, so a
# long run never fails at its end on an unwritable path. "folder"/"root" in the help text
# marks an output folder.
OUTPUT_OPTIONS = {"output", "out", "csv", "markdown", "predictions", "plots"}


def check_outputs_first(group) -> None:
    """Give every output option of every command a callback that checks writability."""
    for command in group.commands.values():
        if hasattr(command, "commands"):
            check_outputs_first(command)
            continue
        for param in command.params:
            if param.name not in OUTPUT_OPTIONS or getattr(param, "is_flag", False):
                continue
            help_text = (getattr(param, "help", "") or "").lower()
            folder = "folder" in help_text or "root" in help_text
            option = min(param.opts, key=len)

            def checked(ctx, p, value, previous=param.callback, folder=folder, option=option):
                if previous is not None:
                    value = previous(ctx, p, value)
                if value is not None and not ctx.resilient_parsing:
                    check_output(value, option, folder)
                return value

            param.callback = checked
        _refuse_outputs_over_inputs(command)


def _refuse_outputs_over_inputs(command) -> None:
    """Wrap ``command`` so that, once every option is parsed and before it runs, an output
    option naming one of its inputs (or a path inside an input export folder) is refused."""
    outputs = [p for p in command.params
               if p.name in OUTPUT_OPTIONS and not getattr(p, "is_flag", False)]
    if not outputs or command.callback is None:
        return
    inner = command.callback

    @functools.wraps(inner)
    def guarded(*args, **kwargs):
        inputs = [(_label(p), path) for p in command.params if p not in outputs
                  for path in _paths_in(kwargs.get(p.name))]
        for param in outputs:
            if kwargs.get(param.name) is not None:
                refuse_overwriting_inputs(kwargs[param.name], inputs, min(param.opts, key=len))
        return inner(*args, **kwargs)

    command.callback = guarded


def _label(param) -> str:
    if param.param_type_name == "argument":
        return (param.metavar or param.name).upper()
    return max(param.opts, key=len)


def _paths_in(value) -> list[Path]:
    """The existing paths an option's value names (a list's items; ``A,B`` lists such as
    ``--lm BASE,AUG``)."""
    if isinstance(value, (list, tuple)):
        return [path for item in value for path in _paths_in(item)]
    if not isinstance(value, (str, Path)) or isinstance(value, bool) or not str(value):
        return []
    names = [str(value)] + (str(value).split(",") if isinstance(value, str) else [])
    return [Path(name) for name in dict.fromkeys(names) if name and Path(name).exists()]


def check_option_first(group, name: str, check: Callable) -> None:
    """Give every ``--<name>`` option of ``group``'s commands a callback that runs
    ``check(value)`` before the command starts (after any callback it already had)."""
    for command in group.commands.values():
        if hasattr(command, "commands"):
            check_option_first(command, name, check)
            continue
        for param in command.params:
            if param.name != name or "--" + name.replace("_", "-") not in param.opts:
                continue

            def checked(ctx, p, value, previous=param.callback):
                if previous is not None:
                    value = previous(ctx, p, value)
                if value is not None and not ctx.resilient_parsing:
                    check(value)
                return value

            param.callback = checked


def check_threads_first(group) -> None:
    """``--threads`` outside 1 .. ``compgen.device.max_threads()`` is refused before the
    command starts."""
    check_option_first(group, "threads", lambda value: check_threads(value, "--threads"))


def check_train_numbers_first(group) -> None:
    """Every numeric option of ``compgen train``'s commands (``--lr``, ``--time-budget``,
    ``--hidden``, ...) is checked against its range in ``compgen.training.numeric_options``
    before the command starts."""
    for name in NUMERIC_OPTIONS:
        check_option_first(group, name, lambda value, name=name: check_number(name, value))


def check_seeds_first(group) -> None:
    """A ``--seed`` outside the signed 64-bit range (``compgen.errors.check_seed``) is
    refused before the command starts, instead of wrapping or overflowing later."""
    check_option_first(group, "seed", check_seed)


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


def option_names(group) -> set[str]:
    """The parameter names of every option of every command under ``group``, and the off
    switches of its on/off flags by their own names (``all_prototypes``: --all-prototypes
    sets ``rare_prototypes`` off)."""
    names: set[str] = set()
    for command in group.commands.values():
        if hasattr(command, "commands"):
            names |= option_names(command)
        else:
            names |= {param.name for param in command.params if param.name}
            names |= {flag.removeprefix("--").replace("-", "_") for param in command.params
                      for flag in getattr(param, "secondary_opts", ()) if flag.startswith("--")}
    return names


def with_flags(template: str, known) -> str:
    """``template`` (a SettingError's, or a library log line) with each `setting` of
    ``known`` written as its flag; a backquoted word that no command has as an option
    (text quoted from a user's program, say) stays as it is."""
    return name_settings(template, lambda name: flag_of(name) if name in known else f"`{name}`")


def flags_in(error, group) -> str:
    """A SettingError's message with each setting written as its flag."""
    return with_flags(error.template, option_names(group) | set(FLAGS))


@functools.cache
def _known_settings() -> frozenset:
    return frozenset(option_names(typer.main.get_command(app)) | set(FLAGS))


def log_with_flags(console_to: Console):
    """A library ``log`` callback that prints each line with its `settings` written as
    the flags that set them (as ``flags_in`` does for errors)."""
    def log(line: str) -> None:
        console_to.print(with_flags(line, _known_settings()), highlight=False, markup=False)
    return log
