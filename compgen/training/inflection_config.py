"""How the character Transformer inflection model is trained: the ``[train]`` section of
the STEM-CORRUPT preset (its own module so that reading a preset does not import the
training loop)."""

from __future__ import annotations

from dataclasses import dataclass, field

from compgen.configs.defaults import defaults_from
from compgen.configs.stem_corrupt_run import STEM_CORRUPT_PRESET
from compgen.errors import UserError
from compgen.models.inflection import InflectionConfig


@dataclass(frozen=True)
@defaults_from(STEM_CORRUPT_PRESET, "train")
class InflectionTrainConfig:
    updates: int
    batch_size: int
    lr: float
    warmup: int
    warmup_init_lr: float
    label_smoothing: float
    validate_every: int     # 0 = after an epoch (fairseq), at most ~10 % of the time
    seed: int
    model: InflectionConfig = field(default_factory=InflectionConfig)

    def validate(self) -> None:
        for name in ("updates", "batch_size", "warmup"):
            if getattr(self, name) < 1:
                raise UserError(f"{name.replace('_', '-')} must be >= 1 (got {getattr(self, name)})")
        if self.validate_every < 0:
            raise UserError("--validate-every must be >= 0")
