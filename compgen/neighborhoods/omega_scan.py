"""SCAN prototype sets Omega: the (xp, xpp) pairs a generator samples from."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import polars as pl

from compgen.data.bitmasks import EncodedSets, encode_sets, popcount
from compgen.neighborhoods.similarity import BLOCK

TEMPLATE_SPLITS = ("around_right", "right", "opposite_right", "jump_around_right", "template")
EXACT_CYCLE_LIMIT = 1 << 20  # Omega sizes up to this cycle an explicit shuffled order


class PrototypeSet:
    """Sampling-time prototype set Omega, drawn lazily.

    Holds ``first`` (indices of first-prototype candidates into ``data``) and, for two
    prototypes, ``second`` (second-prototype candidates); a pair ``(i, j)`` is valid when
    ``i != j`` and, with ``one_type_apart``, exactly one token type of ``data[i]`` is
    missing from ``data[j]``. Valid tuples are numbered i-major (the reference's list
    order) without listing them: ``_decode`` maps numbers to tuples.

    :meth:`sample` follows the reference's ``cycle(shuffle(Omega))`` -- each tuple once
    in a random order, then the same order again -- when ``len(self)`` is at most
    ``EXACT_CYCLE_LIMIT``; larger sets (SCAN around_right: ~3.75 M pairs) are sampled
    uniformly with replacement, which for the few thousand draws a run makes is the same
    distribution.
    """

    def __init__(self, data, first, second=None, masks=None, one_type_apart=False, rng=None,
                 cover=None):
        self.data = [list(d) for d in data]
        self.first = np.asarray(first, dtype=np.int64)
        self.second = None if second is None else np.asarray(second, dtype=np.int64)
        self.masks = masks
        self.one_type_apart = one_type_apart
        # token-set bitmask the tuple's prototypes must contain between them (or None)
        self.cover = cover
        if cover is not None and self.second is None:
            self.first = self.first[((masks[self.first] & cover) == cover).all(-1)]
        self.rng = np.random.default_rng(rng)
        if self.second is None:
            counts = np.ones(len(self.first), dtype=np.int64)
        else:
            counts = np.concatenate(
                [
                    self._valid(self.first[s : s + BLOCK]).sum(1)
                    for s in range(0, len(self.first), BLOCK)
                ]
                or [np.zeros(0, np.int64)]
            )
        self.counts = counts.astype(np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.counts)])
        self.size = int(self.starts[-1])
        self._order = None
        self._cursor = 0

    def __len__(self) -> int:
        return self.size

    @property
    def nproto(self) -> int:
        return 1 if self.second is None else 2

    def _valid(self, firsts: np.ndarray) -> np.ndarray:
        ok = firsts[:, None] != self.second[None, :]
        if self.one_type_apart:
            missing = popcount(
                self.masks[firsts][:, None, :] & ~self.masks[self.second][None, :, :]
            )
            ok &= missing == 1
        if self.cover is not None:
            union = self.masks[firsts][:, None, :] | self.masks[self.second][None, :, :]
            ok &= ((union & self.cover) == self.cover).all(-1)
        return ok

    def _decode(self, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        row = np.searchsorted(self.starts, ranks, side="right") - 1
        i = self.first[row]
        if self.second is None:
            return i, None
        offset = ranks - self.starts[row]
        uniq, inv = np.unique(row, return_inverse=True)
        running = np.cumsum(self._valid(self.first[uniq]), axis=1)
        j = self.second[np.argmax(running[inv] > offset[:, None], axis=1)]
        return i, j

    def indices(self, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        """Draw ``n`` tuples as index arrays into ``data`` (second is None for 1 proto)."""
        if self.size == 0:
            raise ValueError("the prototype set is empty")
        if self.size <= EXACT_CYCLE_LIMIT:
            if self._order is None:
                self._order = self.rng.permutation(self.size)
            pos = (self._cursor + np.arange(n)) % self.size
            self._cursor = int((self._cursor + n) % self.size)
            ranks = self._order[pos]
        else:
            ranks = self.rng.integers(self.size, size=n)
        return self._decode(ranks)

    def sample(self, n: int) -> list[tuple[list[str], ...]]:
        """``n`` prototype tuples (token lists): 1-tuples or (xp, xpp) pairs."""
        i, j = self.indices(n)
        if j is None:
            return [(self.data[a],) for a in i]
        return [(self.data[a], self.data[b]) for a, b in zip(i, j)]


def _length_threshold(lengths: pl.Series, threshold: str) -> float:
    if threshold == "mean":
        return float(lengths.mean())
    if threshold == "mean+std":
        return float(lengths.mean()) + float(lengths.std())
    if threshold == "none":
        return math.inf
    raise ValueError(f"threshold must be 'mean', 'mean+std' or 'none', not {threshold!r}")


def scan_omega(
    data: Sequence[Sequence[str]],
    triples: pl.DataFrame,
    nproto: int,
    split_kind: str,
    rng=None,
    threshold: str = "mean",
    cover: Sequence[str] = (),
) -> PrototypeSet:
    """Sampling-time prototype set for SCAN.

    ``data`` = unique training generative data; ``triples`` = the generator's training
    triples (their mean prototype lengths set the cut). Prototypes are data no longer
    than the mean length of xp (first) / xpp (second) over ``triples``; the reference
    computes the std but uses the mean alone (``threshold="mean"``, default); the paper
    says mean + std (``threshold="mean+std"``); ``threshold="none"`` (not in the reference)
    admits every training datum, for test sets whose data are longer than the training
    data's (around_right: 22.6 output tokens against 11.8). For template splits
    (around_right) a pair must also satisfy ``|setdiff(d1, d2)| == 1``. nproto 0 and 1 use single
    prototypes (0-proto generators ignore them).

    ``cover`` (not in the reference; ``--rare-prototypes``): keep only tuples whose
    prototypes contain every one of these words between them, e.g. ``around`` and
    ``right``: the prototype-side counterpart of resampling by a rare phrase, in the
    spirit of the reference's SIGMORPHON Omega, which is built around rare tags.
    """
    data = [list(d) for d in data]
    lengths = np.array([len(d) for d in data])
    p_cut = _length_threshold(triples["xp"].list.len(), threshold)
    first = np.nonzero(lengths <= p_cut)[0]
    template = split_kind in TEMPLATE_SPLITS
    masks, cover_mask = None, None
    if template or cover:
        _, _, masks, _, index = encode_sets(data, None)
    if cover:
        unknown = [w for w in cover if w not in index]
        if unknown:
            raise ValueError(f"{' '.join(unknown)}: not in the training data, no prototype covers it")
        cover_mask = EncodedSets([list(cover)], dict(index)).masks(masks.shape[1])[0]
    if nproto in (0, 1):
        return PrototypeSet(data, first, masks=masks, rng=rng, cover=cover_mask)
    if nproto != 2:
        raise ValueError(f"nproto must be 0, 1 or 2, not {nproto}")
    pp_cut = _length_threshold(triples["xpp"].list.len(), threshold)
    second = np.nonzero(lengths <= pp_cut)[0]
    return PrototypeSet(data, first, second, masks, one_type_apart=template, rng=rng,
                        cover=cover_mask)
