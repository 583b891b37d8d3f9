"""compgen: compositional data augmentation (R&R, GECA, KenLM interpolation)."""

from compgen.io import keep_torch_compiler_cache as _keep_torch_compiler_cache

__version__ = "0.1.0"

_keep_torch_compiler_cache()
