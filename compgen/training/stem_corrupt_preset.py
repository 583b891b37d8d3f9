"""The STEM-CORRUPT preset: ``compgen/configs/stem_corrupt.toml`` or a TOML file of the
same sections, read strictly (an unknown section or key, or a value of the wrong type, is
one error naming the file and the key). The dataclasses take their defaults from the
bundled file, so a key another file leaves out keeps the bundled value."""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass
from pathlib import Path

from compgen.augment.stem_corrupt.aligner import AlignerConfig
from compgen.augment.stem_corrupt.corrupt import StemCorruptConfig
from compgen.configs.defaults import bundled_preset
from compgen.configs.sections import read_section
from compgen.configs.stem_corrupt_run import STEM_CORRUPT_PRESET, StemCorruptRunConfig
from compgen.errors import UserError, read_text
from compgen.models.inflection import InflectionConfig
from compgen.training.inflection_config import InflectionTrainConfig

KIND = "stem-corrupt"
SECTIONS = {"corrupt": StemCorruptConfig, "aligner": AlignerConfig, "model": InflectionConfig,
            "train": InflectionTrainConfig, "run": StemCorruptRunConfig}
# fields that hold another section (``[corrupt]``'s aligner, ``[train]``'s model), not keys
NESTED = ("aligner", "model")
BUNDLED_NAME = Path(STEM_CORRUPT_PRESET).stem   # what `compgen presets` lists it as


@dataclass(frozen=True)
class StemCorruptPreset:
    corrupt: StemCorruptConfig      # with its aligner
    train: InflectionTrainConfig    # with its model
    run: StemCorruptRunConfig


def stem_corrupt_preset(config: str | Path | None = None) -> StemCorruptPreset:
    """The bundled preset (``config`` None or its name, ``stem_corrupt``), or the TOML file
    ``config`` read over it."""
    path = Path(config) if config is not None else None
    if path is None or (str(config) == BUNDLED_NAME and not path.is_file()):
        return read_stem_corrupt_preset(bundled_preset(STEM_CORRUPT_PRESET), STEM_CORRUPT_PRESET)
    if not path.is_file():
        raise UserError(f"{path}: no such preset file")
    try:
        values = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: not valid TOML ({exc})") from None
    return read_stem_corrupt_preset(values, str(path))


def read_stem_corrupt_preset(values: dict, file: str) -> StemCorruptPreset:
    """The preset of the parsed TOML ``values`` of ``file`` (named in every error)."""
    unknown = sorted(str(key) for key in set(values) - {"kind", *SECTIONS})
    if unknown:
        raise UserError(f"{file}: unknown key '{unknown[0]}' (valid: kind, {', '.join(SECTIONS)})")
    if values.get("kind") != KIND:
        raise UserError(f"{file}: kind must be \"{KIND}\" (got {values.get('kind')!r})")
    read = {name: read_section(cls, values.get(name, {}), f"{file} [{name}]", skip=NESTED)
            for name, cls in SECTIONS.items()}
    return StemCorruptPreset(corrupt=dataclasses.replace(read["corrupt"], aligner=read["aligner"]),
                             train=dataclasses.replace(read["train"], model=read["model"]),
                             run=read["run"])


def corrupt_config(preset: StemCorruptPreset, *, pool_size: int | None = None,
                   seed: int | None = None, iterations: int | None = None,
                   compat: bool | None = None) -> StemCorruptConfig:
    """The preset's ``[corrupt]`` and ``[aligner]`` with the settings given (None: the
    preset's)."""
    aligner = dataclasses.replace(preset.corrupt.aligner, **_given(iterations=iterations,
                                                                   compat=compat))
    return dataclasses.replace(preset.corrupt, aligner=aligner,
                               **_given(pool_size=pool_size, seed=seed))


def _given(**values):
    return {key: value for key, value in values.items() if value is not None}
