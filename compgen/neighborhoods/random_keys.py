"""Random order as hash keys: "the first k qualifying items in a random permutation" is
the k smallest per-(datum, candidate) keys among the qualifying ones."""

from __future__ import annotations

import numpy as np

_NO_KEY = np.uint64(np.iinfo(np.uint64).max)


def _splitmix(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser over a uint64 array (wrapping arithmetic): a cheap hash."""
    with np.errstate(over="ignore"):  # wrap-around is the point
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_keys(seed: int, stream: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Random order key of candidate ``cols`` for query ``rows`` (broadcast): sorting a
    query's candidates by key is a uniformly random permutation, fixed by (seed, stream)."""
    # any signed 64-bit seed: its bits, wrapped as the 64-bit hash wraps
    base = _splitmix(np.array([(seed * 4 + stream) % 2**64], dtype=np.uint64))[0]
    rows = np.asarray(rows, dtype=np.uint64)
    cols = np.asarray(cols, dtype=np.uint64)
    return _splitmix(_splitmix(base ^ (rows << np.uint64(32))) ^ cols)


def smallest_keys(keys: np.ndarray, ok: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: column ids of the (up to) k qualifying entries with the smallest keys, in
    key order, and a validity mask."""
    k = min(k, keys.shape[1])
    masked = np.where(ok, keys, _NO_KEY)
    part = np.argpartition(masked, k - 1, axis=1)[:, :k]
    order = np.argsort(np.take_along_axis(masked, part, 1), axis=1, kind="stable")
    cols = np.take_along_axis(part, order, 1)
    return cols, np.take_along_axis(ok, cols, 1)
