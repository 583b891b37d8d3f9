"""Presets: the TOML files in this folder, and the typed sections they hold.

A generator preset (``kind = "recombine"``) has sections ``[model]``
(:class:`compgen.models.recombine.RecombineConfig`), ``[train]``
(:class:`GeneratorTrainConfig`) and ``[sample]``
(:class:`compgen.decoding.options.SampleOptions`); a predictor
preset (``kind = "seq2seq"``) has ``[model]`` (:class:`compgen.models.seq2seq.Seq2SeqConfig`)
and ``[train]`` (:class:`PredictorTrainConfig`); a GECA preset (``geca_*.toml``) is one
flat table (:class:`compgen.augment.geca.GecaConfig`). Every section is read with
:func:`read_section`, so an unknown key or a value of the wrong type is one error line
naming the key (and, for an unknown key, listing the valid ones).
"""

from compgen.configs.generator_train import GeneratorTrainConfig
from compgen.configs.predictor_train import PredictorTrainConfig
from compgen.configs.sections import read_section

__all__ = ["GeneratorTrainConfig", "PredictorTrainConfig", "read_section"]
