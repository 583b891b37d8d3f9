"""The fast "may derive" test and example statistics for the induction penalty.

``can_maybe_derive(a, b)`` over-approximates "a rule side ``a`` can produce a token
sequence ``b``": the maximal terminal runs of ``a`` occur in ``b`` in order, separated by
at least one token per NT between them (and NTs before the first / after the last run
need as many tokens there); nothing is anchored at either end.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from compgen.augment.csl.rules import is_nt


def can_maybe_derive(a: Sequence[str], b: Sequence[str]) -> bool:
    n_a, n_b = len(a), len(b)
    if n_a > n_b or n_a == 0 or n_b == 0:
        return False
    ia = ib = la = lb = 0
    while True:
        if la >= n_a:
            return True
        if lb >= n_b:
            return False
        if n_a - la > n_b - lb:
            return False
        token = a[la]
        if is_nt(token):  # commit: the NT takes one token, the next run starts after it
            la += 1
            lb += 1
            ia, ib = la, lb
        elif token == b[lb]:
            la += 1
            lb += 1
        else:  # retry the current run one position later
            la = ia
            ib += 1
            lb = ib


class SideIndex:
    """One side (sources or targets) of the examples, indexed to count the examples a
    pattern may derive: token postings narrow the rows, then the exact test runs."""

    def __init__(self, sequences: Sequence[Sequence[str]]):
        self.sequences = [tuple(s) for s in sequences]
        self.lengths = np.array([len(s) for s in self.sequences], dtype=np.int64)
        postings: dict[str, list[int]] = {}
        for row, seq in enumerate(self.sequences):
            for token in set(seq):
                postings.setdefault(token, []).append(row)
        self.postings = {t: np.array(rows, dtype=np.int64) for t, rows in postings.items()}

    def rows(self, pattern: Sequence[str], limit: int) -> np.ndarray:
        """Rows < limit whose sequence the pattern may derive (sorted)."""
        terminals = {t for t in pattern if not is_nt(t)}
        if not terminals:  # only NTs: any sequence at least as long
            return np.flatnonzero(self.lengths[:limit] >= len(pattern))
        lists = []
        for t in terminals:
            rows = self.postings.get(t)
            if rows is None:
                return np.empty(0, dtype=np.int64)
            lists.append(rows[: np.searchsorted(rows, limit)])
        lists.sort(key=len)
        cand = lists[0]
        for other in lists[1:]:
            if cand.size == 0:
                break
            cand = np.intersect1d(cand, other, assume_unique=True)
        cand = cand[self.lengths[cand] >= len(pattern)]
        if all(not is_nt(t) for t in pattern) and len(pattern) == 1:
            return cand
        seqs = self.sequences
        pattern = tuple(pattern)
        return np.array([r for r in cand.tolist() if can_maybe_derive(pattern, seqs[r])], dtype=np.int64)


class PenaltyStats:
    """Penalty of a rule against the examples of the current curriculum stage (rows
    ``< limit`` of the length-sorted examples), cached per stage."""

    def __init__(self, sources: SideIndex, targets: SideIndex, k_source: float, k_target: float):
        self.sources, self.targets = sources, targets
        self.k_source, self.k_target = k_source, k_target
        self.limit = 0
        self._source_rows: dict[tuple[str, ...], np.ndarray] = {}
        self._target_rows: dict[tuple[str, ...], np.ndarray] = {}
        self._penalty: dict = {}

    def set_stage(self, limit: int) -> None:
        self.limit = limit
        self._source_rows.clear()
        self._target_rows.clear()
        self._penalty.clear()

    def _rows(self, cache, index: SideIndex, side: tuple[str, ...]) -> np.ndarray:
        rows = cache.get(side)
        if rows is None:
            rows = cache[side] = index.rows(side, self.limit)
        return rows

    def penalty(self, rule) -> float:
        value = self._penalty.get(rule)
        if value is not None:
            return value
        src = self._rows(self._source_rows, self.sources, rule.source)
        tgt = self._rows(self._target_rows, self.targets, rule.target)
        n_s, n_t = src.size, tgt.size
        n_st = np.intersect1d(src, tgt, assume_unique=True).size if n_s and n_t else 0
        if n_st == 0:
            value = 0.0
        else:
            value = -self.k_source * math.log2(n_st / n_t) - self.k_target * math.log2(n_st / n_s)
        self._penalty[rule] = value
        return value
