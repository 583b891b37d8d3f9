"""Reading one preset section into its dataclass, strictly."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import TypeVar

from compgen.errors import UserError

T = TypeVar("T")
_KIND_NAMES = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _kind_name(kind) -> str:
    if typing.get_origin(kind) is list:
        return {int: "a list of integers", str: "a list of strings"}.get(typing.get_args(kind)[0], "a list")
    return _KIND_NAMES.get(kind, "nothing" if kind is type(None) else str(kind))


def checked_value(value, hint, where: str, key: str):
    """``value`` as the field's type (an int is a valid float); a UserError otherwise."""
    allowed = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    if value is None and type(None) in allowed:
        return None
    for kind in allowed:
        if kind is bool and isinstance(value, bool):
            return value
        if kind is int and isinstance(value, int) and not isinstance(value, bool):
            return value
        if kind is float and isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if kind is str and isinstance(value, str):
            return value
        if typing.get_origin(kind) is list and isinstance(value, list):   # a TOML array
            item = typing.get_args(kind)[0]
            return [checked_value(v, item, where, key) for v in value]
    wanted = " or ".join(_kind_name(k) for k in allowed)
    raise UserError(f"{where}: option '{key}' must be {wanted}, not {value!r}")


def known_fields(cls: type[T], values: Mapping, what: str) -> T:
    """``cls(**values)``, a ValueError naming ``what`` and the valid keys for a key ``cls``
    (a dataclass) does not have: a model's options, whose values are checked by the class."""
    names = sorted(f.name for f in dataclasses.fields(cls))
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise ValueError(f"unknown {what}(s) {', '.join(unknown)} "
                         f"(valid: {', '.join(n for n in names if n != 'vocab_size')})")
    return cls(**values)


def read_section(cls: type[T], values: Mapping, where: str, *, skip: tuple[str, ...] = ()) -> T:
    """``cls`` (a dataclass) from the key/value table of one preset section.

    ``where`` names the section in messages (e.g. ``recombine_scan.toml [train]``); a
    key ``cls`` does not have, or a value of the wrong type, is a UserError naming it.
    ``skip``: fields that are not preset keys (set by the program, e.g. ``vocab_size``).
    """
    if not isinstance(values, Mapping):
        raise UserError(f"{where}: expected a table of options, not {values!r}")
    valid = sorted(f.name for f in dataclasses.fields(cls) if f.name not in skip)
    unknown = [str(k) for k in values if k not in valid]
    if unknown:
        names = ", ".join(f"'{k}'" for k in unknown)
        raise UserError(f"{where}: unknown option{'s' if len(unknown) > 1 else ''} {names} "
                        f"(valid: {', '.join(valid)})")
    hints = typing.get_type_hints(cls)
    checked = {k: checked_value(v, hints[k], where, k) for k, v in values.items()}
    try:
        return cls(**checked)
    except ValueError as exc:  # a range check of the dataclass
        raise UserError(f"{where}: {exc}") from None
