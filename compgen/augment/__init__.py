"""Data augmentation: GECA (``geca/``), CSL (``csl/``), STEM-CORRUPT (``stem_corrupt/``), selection."""

from compgen.augment.geca import GecaConfig, GecaResult, geca_augment, load_preset

__all__ = ["GecaConfig", "GecaResult", "geca_augment", "load_preset"]
