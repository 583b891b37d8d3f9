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
