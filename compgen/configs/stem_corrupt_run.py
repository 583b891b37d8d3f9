"""The ``[run]`` section of the STEM-CORRUPT preset: what the stem-corrupt-LANG pipeline
selects and how it evaluates (its pool and its models are the preset's other sections)."""

from __future__ import annotations

from dataclasses import dataclass

from compgen.configs.defaults import defaults_from

STEM_CORRUPT_PRESET = "stem_corrupt.toml"


@dataclass
@defaults_from(STEM_CORRUPT_PRESET, "run")
class StemCorruptRunConfig:
    strategies: list[str]   # selection strategies, each run at every size
    sizes: list[int]        # synthetic rows selected
    uncertainty: str        # hypothesis | reference: what the pool's scores are
    beam: int               # beam width of evaluation
