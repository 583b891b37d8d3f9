"""Vectorised numpy building blocks: segment indices, chunked cross products, a fast unique."""

from __future__ import annotations

import resource

import numpy as np


def segments(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For groups of the given sizes: (group index of each element, index within group)."""
    sizes = sizes.astype(np.int64)
    group = np.repeat(np.arange(len(sizes)), sizes)
    starts = np.cumsum(sizes) - sizes
    within = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(starts, sizes)
    return group, within


def cross_chunks(unit_lo: np.ndarray, unit_m: np.ndarray, left: np.ndarray, chunk: int = 4_000_000):
    """Yield (left row, unit) for every left row x every unit of its example, in chunks of
    about ``chunk`` rows. ``unit_lo``/``unit_m``: per left row, the first unit and the unit
    count of its example."""
    sizes = unit_m.astype(np.int64)
    cum = np.cumsum(sizes)
    begin = 0
    while begin < len(left):
        base = cum[begin - 1] if begin else 0
        end = max(int(np.searchsorted(cum, base + chunk, side="right")), begin + 1)
        g, w = segments(sizes[begin:end])
        yield left[begin:end][g], unit_lo[begin:end][g] + w
        begin = end


def unique(keys: np.ndarray):
    """(sorted distinct keys, index of the first occurrence of each, inverse), like
    ``np.unique(..., return_index=True, return_inverse=True)`` but with a stable radix
    argsort (much faster on integer keys)."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    new = np.ones(len(sk), bool)
    new[1:] = sk[1:] != sk[:-1]
    inv = np.empty(len(keys), np.int64)
    inv[order] = np.cumsum(new) - 1
    return sk[new], order[new], inv


def peak_rss_mb() -> float:
    """Peak resident memory of this process image: VmHWM (getrusage's ru_maxrss also
    counts the parent's memory at the fork of a child started with fork + exec)."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
