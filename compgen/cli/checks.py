"""Checks every command gets as it loads, run once its options are parsed and before it
starts: outputs writable and not one of its inputs, ``--seed``, ``--threads`` and the
numeric options of ``compgen train`` in range. A long run never fails at its end on an
unwritable path or at its start after minutes of loading on a bad number."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from compgen.device import check_threads
from compgen.errors import check_seed
from compgen.io import check_output, refuse_overwriting_inputs
from compgen.training.numeric_options import NUMERIC_OPTIONS, check_number

# Options that name something the command writes. "folder"/"root" in the help text marks
# an output folder.
OUTPUT_OPTIONS = {"output", "out", "csv", "markdown", "predictions", "plots"}


def check_before_running(command, path: tuple[str, ...]) -> None:
    """Give ``command`` (``compgen`` + ``path``) the checks of this module."""
    check_outputs_first(command)
    check_option_first(command, "seed", check_seed)
    check_option_first(command, "threads", lambda value: check_threads(value, "--threads"))
    if path[0] == "train":   # --lr, --time-budget, --hidden, ... of compgen train's commands
        for name in NUMERIC_OPTIONS:
            check_option_first(command, name, functools.partial(check_number, name))


def check_outputs_first(command) -> None:
    """Give every output option of ``command`` a callback that checks writability, and
    refuse an output that names one of its inputs."""
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


def check_option_first(command, name: str, check: Callable) -> None:
    """Give ``command``'s ``--<name>`` option, if it has one, a callback that runs
    ``check(value)`` before the command starts (after any callback it already had)."""
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
