"""Similarity scores: edit distances over token strings (rapidfuzz, in blocks) and the
multiset Jaccard similarity of lemmas."""

from __future__ import annotations

import numpy as np
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

BLOCK = 512  # query rows per all-pairs block (memory ~ BLOCK x |train| x 4 bytes)
SIM = 0.5  # similarity threshold of every SCAN neighbourhood


def edit_distances(queries: list[str], choices: list[str], cutoff: int, workers: int) -> np.ndarray:
    """Exact Levenshtein distances, or ``cutoff + 1`` where larger than ``cutoff``."""
    return process.cdist(
        queries,
        choices,
        scorer=Levenshtein.distance,
        dtype=np.int32,
        score_cutoff=cutoff,
        workers=workers,
    )


def is_close(dist: np.ndarray, qlen: np.ndarray, tlen: np.ndarray) -> np.ndarray:
    """``sim > 0.5 and sim != 1`` from integer distances."""
    longest = np.maximum(qlen[:, None], tlen[None, :])
    return (2 * dist < longest) & (dist != 0)


def jaccard(counts_a: np.ndarray, counts_b: np.ndarray) -> np.ndarray:
    """Multiset Jaccard similarity |a & b| / |a | b| of character-count rows (all pairs);
    1 for equal strings, 0 if one is empty (float64, so equal ratios compare equal).
    |a & b| = sum_t [a >= t] . [b >= t] over count levels t: one exact matmul per level."""
    inter = np.zeros((len(counts_a), len(counts_b)), dtype=np.float32)
    for level in range(1, int(max(counts_a.max(initial=0), counts_b.max(initial=0))) + 1):
        inter += (counts_a >= level).astype(np.float32) @ (counts_b >= level).astype(np.float32).T
    inter = inter.astype(np.int64)
    union = (
        counts_a.sum(1, dtype=np.int64)[:, None] + counts_b.sum(1, dtype=np.int64)[None, :] - inter
    )
    return np.where(union > 0, inter / np.maximum(union, 1), 0.0)
