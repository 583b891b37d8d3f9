"""compgen: compositional data augmentation (R&R, GECA, KenLM interpolation)."""

__version__ = "0.1.0"
