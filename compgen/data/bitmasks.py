"""Token types and tag sets as uint64 bitmask rows (set difference and coverage tests)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class EncodedSets:
    """Token sequences as strings (one character per token id, for rapidfuzz), their
    lengths and token-set bitmasks (uint64 words)."""

    def __init__(self, seqs: Sequence[Sequence[str]], index: dict[str, int]):
        self.ids = [[index.setdefault(t, len(index)) for t in s] for s in seqs]
        self.strings = ["".join(chr(0x100 + i) for i in s) for s in self.ids]
        self.lengths = np.array([len(s) for s in self.ids], dtype=np.int32)

    def masks(self, n_words: int) -> np.ndarray:
        m = np.zeros((len(self.ids), n_words), dtype=np.uint64)
        rows = np.repeat(np.arange(len(self.ids)), self.lengths)
        toks = np.fromiter(
            (t for s in self.ids for t in s), dtype=np.int64, count=int(self.lengths.sum())
        )
        np.bitwise_or.at(
            m, (rows, toks // 64), np.left_shift(np.uint64(1), (toks % 64).astype(np.uint64))
        )
        return m


def encode_sets(trn, queries):
    index: dict[str, int] = {}
    t = EncodedSets(trn, index)
    q = EncodedSets(queries, index) if queries is not None else t
    n_words = max(1, (len(index) + 63) // 64)
    return t, q, t.masks(n_words), (q.masks(n_words) if queries is not None else None), index


def popcount(a: np.ndarray) -> np.ndarray:
    return np.bitwise_count(a).sum(axis=-1)


def setdiff_strings(query: EncodedSets, qi: np.ndarray, other_masks: np.ndarray) -> np.ndarray:
    """``setdiff(query[qi], other)`` per row -- distinct tokens of the query datum absent
    from the other datum, in first-occurrence order -- as comparable strings."""
    width = int(max(1, max((len(dict.fromkeys(s)) for s in query.ids), default=1)))
    distinct = np.full((len(query.ids), width), -1, dtype=np.int64)
    for row, s in enumerate(query.ids):  # once per datum, not per pair
        d = list(dict.fromkeys(s))
        distinct[row, : len(d)] = d
    toks = distinct[qi]
    safe = np.maximum(toks, 0)
    words = np.take_along_axis(other_masks, safe // 64, 1)
    present = ((words >> (safe % 64).astype(np.uint64)) & np.uint64(1)).astype(bool)
    keep = (toks >= 0) & ~present
    order = np.argsort(~keep, axis=1, kind="stable")  # kept tokens first, in order
    toks = np.take_along_axis(np.where(keep, toks, -1), order, 1)
    chars = np.where(toks >= 0, toks + 0x100, 0).astype(np.uint32)
    return chars.view(f"<U{width}").ravel()  # trailing NULs are dropped


def tag_masks(tag_lists: Sequence[Sequence[str]]) -> np.ndarray:
    """Tag SETS as uint64 bitmask rows (one bit per distinct tag)."""
    index: dict[str, int] = {}
    enc = EncodedSets(tag_lists, index)
    return enc.masks(max(1, (len(index) + 63) // 64))
