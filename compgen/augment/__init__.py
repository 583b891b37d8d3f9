"""Data augmentation: GECA (``geca.py``)."""

from compgen.augment.geca import GecaConfig, GecaResult, geca_augment, load_preset

__all__ = ["GecaConfig", "GecaResult", "geca_augment", "load_preset"]
