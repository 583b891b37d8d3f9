"""A counter-based random stream: the uniform draw of (seed, sample index, step).

Every random choice of sampling (the token drawn at step t for sample i, the latent
prior's components) is a pure function of three integers, so it does not depend on the
batch a sample is decoded in, on which rows finished earlier, on thread timing or on the
backend: Python and the C++ runner (``cpp_runner/src/random_stream.hpp``) compute the
same bits.

    x = splitmix64(splitmix64(splitmix64(seed) ^ index) ^ step)
    u = (x >> 11) * 2**-53          # uniform double in [0, 1)

splitmix64 is Steele, Lea and Flood's 64-bit finaliser (the seeding function of the
xoshiro generators); all arithmetic is modulo 2**64. A seed is a signed 64-bit integer,
-2**63 <= seed < 2**63 (``check_seed``), read as its two's complement on every backend
(the C++ runner's int64 cast to uint64): -1 is 2**64 - 1, and no two seeds in the range
give the same stream. A seed outside it is refused, never wrapped.
"""

from __future__ import annotations

import numpy as np

NAME = "splitmix64(splitmix64(splitmix64(seed) ^ index) ^ step) >> 11, * 2^-53"
# steps reserved for the latent prior's draws (far above any decoding step)
LATENT_STEP = 1 << 32

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MUL1 = np.uint64(0xBF58476D1CE4E5B9)
_MUL2 = np.uint64(0x94D049BB133111EB)
_MASK = (1 << 64) - 1
from compgen.errors import SEED_MAX, SEED_MIN, check_seed  # noqa: F401 (re-exported)


def _as_u64(values) -> np.ndarray:
    """Integers (any sign, scalars or arrays) -> uint64 modulo 2**64."""
    array = np.asarray(values)
    if array.dtype == np.uint64:
        return array
    if array.dtype.kind == "i":  # two's complement is already modulo 2**64
        return array.astype(np.int64).view(np.uint64)
    return np.asarray([int(v) & _MASK for v in array.ravel()], np.uint64).reshape(array.shape)


def splitmix64(x) -> np.ndarray:
    x = _as_u64(x)
    with np.errstate(over="ignore"):
        z = x + _GOLDEN
        z = (z ^ (z >> np.uint64(30))) * _MUL1
        z = (z ^ (z >> np.uint64(27))) * _MUL2
    return z ^ (z >> np.uint64(31))


def bits(seed: int, index, step) -> np.ndarray:
    """The 64 random bits of (seed, index, step); ``index`` and ``step`` broadcast."""
    base = splitmix64(np.uint64(seed & _MASK))
    return splitmix64(splitmix64(base ^ _as_u64(index)) ^ _as_u64(step))


def uniform(seed: int, index, step) -> np.ndarray:
    """Uniform doubles in [0, 1) for (seed, index, step); ``index``/``step`` broadcast."""
    return (bits(seed, index, step) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
