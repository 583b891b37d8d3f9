"""``[train]`` of a predictor preset: the seq2seq training regime (spec §6.2)."""

from __future__ import annotations

from dataclasses import dataclass

from compgen.configs.sections import read_section
from compgen.errors import SettingError


@dataclass
class PredictorTrainConfig:
    batch_size: int = 64
    lr: float = 0.001
    gradnorm: float = 1.0       # global L2 clip; 0 = off
    epochs: int = 150
    patience: int = 10          # epochs without dev improvement before lr *= lrdecay
    lrdecay: float = 0.5
    gamma: float = 0.0          # one-off lr *= gamma at epoch epochs // 2; 0 = off
    dev_fraction: float = 0.05  # SCAN: the part of train held out as dev
    eval_batch_size: int = 256
    # batches per epoch; 0: |train| / (1 - p_aug) / B (R&R). GECA's predictor: 32, whatever
    # the data size (an epoch is then also when the schedule looks at dev)
    batches_per_epoch: int = 0
    # what the schedule and restore_best watch on dev: exact match (the papers'), or exact
    # match with token F1 breaking its ties ("exact_match+f1"): on a small, hard dev set
    # exact match can sit at 0 for many epochs while the model still improves
    monitor: str = "exact_match"
    restore_best: bool = False  # end with the best-dev epoch's weights (the reference: last)
    # leave out augmented pairs longer than the model's max_len (the reference cuts them:
    # a cut target has no end token and teaches the predictor not to stop)
    drop_long_augmented: bool = False
    # the decoder over packed steps with one weight-gradient product per layer
    # (compgen.models.seq2seq_training); false: Seq2Seq.loss, the reference computation
    packed_decoder: bool = True

    @classmethod
    def from_dict(cls, d: dict, where: str = "[train]") -> PredictorTrainConfig:
        cfg = read_section(cls, d, where)
        if cfg.monitor not in MONITORS:
            raise SettingError(f"{where}: option 'monitor' must be one of {', '.join(MONITORS)}, "
                               f"not {cfg.monitor!r}")
        return cfg


MONITORS = ("exact_match", "exact_match+f1")
