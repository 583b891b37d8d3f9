"""What each pipeline step leaves beside its output: the wall time of every step
(``timing.json``) and the options the output was made with (``<output>.settings.json``)."""

from __future__ import annotations

import json
from pathlib import Path

from compgen.errors import SettingError
from compgen.io import atomic_open


class Timer:
    """Wall seconds per step, kept in ``timing.json`` across resumed runs."""

    def __init__(self, path: Path):
        self.path = path
        self.seconds = json.loads(path.read_text()) if path.is_file() else {}

    def record(self, step: str, seconds: float) -> None:
        self.seconds[step] = round(self.seconds.get(step, 0.0) + seconds, 1)
        self._write()

    def forget(self, steps) -> None:
        removed = [self.seconds.pop(step, None) for step in steps]
        if any(r is not None for r in removed):
            self._write()

    def _write(self) -> None:
        with atomic_open(self.path, "w", encoding="utf-8") as f:
            json.dump(self.seconds, f, indent=1)


# ------------------------------------------------------------------ settings of each step
# Each step's output has ``<output>.settings.json`` beside it: the options it was made with.
# A later call that asks for other values stops with one line naming them, instead of
# reusing the output silently. (--generator-epochs/--generator-steps train a generator on
# and --p-aug retrains the predictor: those redo the steps instead.)

def settings_path(output: Path) -> Path:
    return output.with_name(output.name + ".settings.json")


def check_settings(output: Path, settings: dict, run, seed: int) -> None:
    """Stop when ``output`` exists and was made with other ``settings`` (option -> value;
    the options are recorded by their flags, ``--n``, and named by their settings)."""
    recorded_path = settings_path(output)
    if not output.exists() or not recorded_path.is_file():
        return
    recorded = json.loads(recorded_path.read_text(encoding="utf-8"))
    changed = [f"`{option.removeprefix('--').replace('-', '_')}` {_shown(recorded.get(option))} "
               f"-> {_shown(value)}"
               for option, value in settings.items() if recorded.get(option) != value]
    if changed:
        raise SettingError(f"{run.name} seed {seed}: {output} was made with other settings "
                           f"({'; '.join(changed)}); repeat the earlier options, use another "
                           f"`root`, or delete {output.name} to redo it")


def record_settings(output: Path, settings: dict) -> None:
    with atomic_open(settings_path(output), "w", encoding="utf-8") as f:
        json.dump(settings, f, indent=1)


def _shown(value) -> str:
    return "default" if value is None else str(value)
