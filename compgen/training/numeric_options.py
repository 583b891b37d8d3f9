"""The numeric options of the train commands and of the API's train functions, and
their ranges, in one table: each value is checked before any data is read or model
built (a NaN rate, a negative budget or a size that overflows would write garbage or
end in a traceback)."""

from __future__ import annotations

import math

from compgen.errors import SettingError

# widths and lengths beyond this overflow torch's tensor sizes (a traceback), long before
# memory would run out: a size of 2^20 already asks for terabytes
MAX_SIZE = 2 ** 20

# name: (kind, lowest, highest, lowest excluded); None = no bound
NUMERIC_OPTIONS = {
    "nproto": (int, 0, 2, False),
    "epochs": (int, 1, None, False),
    "hidden": (int, 1, MAX_SIZE, False),
    "embed": (int, 1, MAX_SIZE, False),
    "attdim": (int, 1, MAX_SIZE, False),
    "max_len": (int, 1, MAX_SIZE, False),
    "batch_size": (int, 1, MAX_SIZE, False),
    "max_steps": (int, 0, None, False),
    "keep_every": (int, 0, None, False),
    "lr": (float, 0.0, None, True),
    "time_budget": (float, 0.0, None, True),
    "p_aug": (float, 0.0, 1.0, False),
}


def check_number(name: str, value) -> None:
    """``value`` of the numeric option ``name`` in its range, else a SettingError naming it
    (None: not given)."""
    if value is None:
        return
    kind, low, high, low_excluded = NUMERIC_OPTIONS[name]
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            (kind is int and not isinstance(value, int)):
        raise SettingError(f"`{name}` {value!r}: must be {'an integer' if kind is int else 'a number'}")
    if kind is float and not math.isfinite(value):
        raise SettingError(f"`{name}` {value}: must be a finite number")
    if value < low or (low_excluded and value == low):
        what = "an integer " if kind is int else ""
        raise SettingError(f"`{name}` {value}: must be {what}{'>' if low_excluded else '>='} "
                           f"{low:g}")
    if name == "p_aug" and value >= high:
        raise SettingError(f"`{name}` {value}: must be in [0, 1)")
    if high is not None and value > high:
        raise SettingError(f"`{name}` {value}: too large (at most {high:,}"
                           + (", beyond which torch's sizes overflow)" if high == MAX_SIZE else ")"))


def check_numbers(**values) -> None:
    """``check_number`` for each ``name=value`` given."""
    for name, value in values.items():
        check_number(name, value)
