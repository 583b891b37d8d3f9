"""compgen: compositional data augmentation (R&R, GECA, KenLM interpolation)."""

import os as _os

from compgen.io import user_cache as _user_cache

__version__ = "0.1.0"

# torch makes its compiler's cache folder in the system temp dir as soon as an optimizer is
# built, and leaves it there: a compgen process keeps it in the user's cache instead
_os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(_user_cache("inductor")))
