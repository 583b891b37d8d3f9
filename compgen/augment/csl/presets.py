"""The CSL presets: ``compgen/configs/csl_<name>.toml``, read strictly (an unknown key or
section, or a value of the wrong type, is one error naming the file and the key)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources

from compgen.augment.csl.induction import InductionConfig
from compgen.augment.csl.model import ModelConfig
from compgen.augment.csl.sampler import SamplerConfig
from compgen.configs import read_section
from compgen.errors import UserError

CSL_PRESETS = ("scan", "cogs", "generic")
SECTIONS = {"induction": InductionConfig, "model": ModelConfig, "sampler": SamplerConfig}


@dataclass(frozen=True)
class CslConfig:
    induction: InductionConfig
    model: ModelConfig
    sampler: SamplerConfig


def preset(name: str) -> CslConfig:
    """The CSL preset ``name`` (``scan``, ``cogs`` or ``generic``)."""
    if name not in CSL_PRESETS:
        raise UserError(f"unknown CSL config '{name}' (valid: {', '.join(CSL_PRESETS)})")
    file = f"csl_{name}.toml"
    return read_csl_preset(resources.files("compgen").joinpath("configs", file).read_text(), file)


def read_csl_preset(text: str, file: str) -> CslConfig:
    """A CSL preset from the TOML ``text`` of ``file`` (named in every error)."""
    try:
        values = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{file}: not valid TOML ({exc})") from None
    unknown = sorted(set(values) - {"kind", *SECTIONS})
    if unknown:
        raise UserError(f"{file}: unknown key '{unknown[0]}' (valid: kind, {', '.join(SECTIONS)})")
    if values.get("kind") != "csl":
        raise UserError(f"{file}: kind must be \"csl\" (got {values.get('kind')!r})")
    missing = [section for section in SECTIONS if section not in values]
    if missing:
        raise UserError(f"{file}: no [{missing[0]}] section")
    return CslConfig(*(read_section(cls, values[section], f"{file} [{section}]")
                       for section, cls in SECTIONS.items()))
