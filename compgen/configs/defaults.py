"""Dataclass defaults read from a bundled preset, so that a setting's default is written
once, in the TOML file, and the dataclass, the command line and the Python API all take it
from there."""

from __future__ import annotations

import dataclasses
import inspect
import tomllib
import typing
from functools import cache
from pathlib import Path

from compgen.configs.sections import checked_value
from compgen.errors import UserError

CONFIG_DIR = Path(__file__).parent


@cache
def bundled_preset(file: str) -> dict:
    """The parsed TOML of ``compgen/configs/<file>`` (read once per process)."""
    try:
        return tomllib.loads((CONFIG_DIR / file).read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{file}: not valid TOML ({exc})") from None


def defaults_from(file: str, section: str):
    """A class decorator, put under ``@dataclass``: each field declared without a default
    takes its default from ``[section]`` of the bundled preset ``file``. A key the class
    does not declare, a field the section does not set, or a value of the wrong type is
    one error naming the file, the section and the key."""
    def apply(cls: type) -> type:
        where = f"{file} [{section}]"
        values = bundled_preset(file).get(section)
        if not isinstance(values, dict):
            raise UserError(f"{file}: no [{section}] section")
        # fields given a default in Python (a nested config's default_factory) are not keys
        keys = [name for name in inspect.get_annotations(cls) if not hasattr(cls, name)]
        unknown = [str(k) for k in values if k not in keys]
        if unknown:
            raise UserError(f"{where}: unknown option '{unknown[0]}' (valid: {', '.join(sorted(keys))})")
        missing = [k for k in keys if k not in values]
        if missing:
            raise UserError(f"{where}: no value for '{missing[0]}'")
        hints = typing.get_type_hints(cls)
        for key in keys:
            value = checked_value(values[key], hints[key], where, key)
            if isinstance(value, list):   # a fresh copy for each instance
                value = dataclasses.field(default_factory=lambda items=tuple(value): list(items))
            setattr(cls, key, value)
        return cls
    return apply
