"""Neighbourhoods and Omega for any seq2seq data: the paper's recipe without SCAN's or
SIGMORPHON's hand-made parts.

Every training datum ``x <sep> y`` gets prototypes retrieved by similarity:

* ``similarity="levenshtein"`` (default): ``1 - lev(a, b) / max(|a|, |b|)`` over token
  sequences (rapidfuzz ``process.cdist``, in blocks); ``"jaccard"``: ``|A & B| / |A | B|``
  of the token *sets* (bitmask popcounts, numpy). A candidate has ``0.5 < sim`` and is not
  the datum itself (Levenshtein: not an identical sequence).
* ``variant="long-short"`` (an added primitive, as SCAN jump): first prototypes are the
  ``FIRST_PROTOTYPES`` most similar candidates; for each, the token types of x it lacks,
  ``d = set(x) - set(xp)``, must be supplied by a second prototype: the
  ``SECOND_PROTOTYPES`` *shortest* data containing every token of d (neither x nor xp).
* ``variant="long-long"`` (a new combination of known parts, as SCAN around_right):
  candidates are the ``LONG_LONG_CANDIDATES`` most similar data lacking between 1 and
  ``max_missing`` token types of x (2 by default: one on each side of ``<sep>``); each of
  the top ``LONG_LONG_TOP`` is a first prototype, and its second prototypes are the top
  ``LONG_LONG_TOP`` other candidates covering what it lacks. At most 9 triples per datum.

Ties are broken in a random order fixed by the seed (``random_keys``). Data with no
qualifying prototype yield no triple (the reference's random fallbacks pair unrelated
data). Omega (:func:`generic_omega`) pairs data no longer than the training prototypes'
lengths (mean, or mean + std, as for SCAN); long-long pairs must also be 1 to
``max_missing`` token types apart, and ``rare`` keeps only tuples holding a rare token.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from compgen.data.bitmasks import EncodedSets, encode_sets, popcount
from compgen.neighborhoods.omega_scan import PrototypeSet
from compgen.neighborhoods.random_keys import hash_keys, smallest_keys
from compgen.neighborhoods.similarity import BLOCK, edit_distances, is_close
from compgen.neighborhoods.triples import TRIPLE_SCHEMA, make_triples

VARIANTS = ("long-short", "long-long")
SIMILARITIES = ("levenshtein", "jaccard")
FIRST_PROTOTYPES = 5
SECOND_PROTOTYPES = 3
LONG_LONG_CANDIDATES = 10
LONG_LONG_TOP = 3
MAX_MISSING = 2
_SCALE = 1 << 20  # similarity quantum of the sort keys (ties below it are random)


def check_choice(name: str, value: str, valid: Sequence[str]) -> None:
    if value not in valid:
        raise ValueError(f"{name} {value!r}: unknown (valid: {', '.join(valid)})")


def _similar(sets: EncodedSets, masks: np.ndarray, rows: np.ndarray, similarity: str,
             workers: int) -> tuple[np.ndarray, np.ndarray]:
    """(similarity, candidate mask) of data ``rows`` against all data."""
    if similarity == "levenshtein":
        cutoff = int(sets.lengths.max() // 2)
        dist = edit_distances([sets.strings[r] for r in rows], sets.strings, cutoff, workers)
        longest = np.maximum(sets.lengths[rows][:, None], sets.lengths[None, :])
        sim = 1.0 - dist / np.maximum(longest, 1)
        ok = is_close(dist, sets.lengths[rows], sets.lengths)
    else:
        inter = popcount(masks[rows][:, None, :] & masks[None, :, :])
        union = popcount(masks[rows][:, None, :] | masks[None, :, :])
        sim = inter / np.maximum(union, 1)
        ok = sim > 0.5
    ok[np.arange(len(rows)), rows] = False
    return sim, ok


def _ranked_keys(seed: int, stream: int, rows: np.ndarray, cols: np.ndarray,
                 primary: np.ndarray) -> np.ndarray:
    """uint64 sort keys: ``primary`` (small integers, ascending) first, then a random order."""
    noise = hash_keys(seed, stream, rows, cols) >> np.uint64(24)
    return (primary.astype(np.uint64) << np.uint64(40)) | noise


def generic_neighborhood(data: Sequence[Sequence[str]], seed: int, variant: str = "long-short",
                         similarity: str = "levenshtein", max_missing: int = MAX_MISSING,
                         workers: int = 1) -> pl.DataFrame:
    """Triples ``(x, xp, xpp)`` (list[str] columns) of the unique generative data ``data``."""
    check_choice("neighborhood", variant, VARIANTS)
    check_choice("similarity", similarity, SIMILARITIES)
    data = [list(d) for d in data]
    if len(data) < 3:
        return pl.DataFrame(schema=TRIPLE_SCHEMA)
    sets, _, masks, _, _ = encode_sets(data, None)
    build = _long_short if variant == "long-short" else _long_long
    qi, n, l = build(sets, masks, seed, similarity, max_missing, workers)
    return make_triples(data, data, qi, n, l)


def _long_short(sets, masks, seed, similarity, max_missing, workers):
    size = len(sets.ids)
    cols = np.arange(size)
    out_q, out_n = [], []
    for start in range(0, size, BLOCK):
        rows = np.arange(start, min(start + BLOCK, size))
        sim, ok = _similar(sets, masks, rows, similarity, workers)
        keys = _ranked_keys(seed, 0, rows[:, None], cols[None, :],
                            np.rint((1.0 - sim) * _SCALE))
        first, valid = smallest_keys(keys, ok, FIRST_PROTOTYPES)
        r, rank = np.nonzero(valid)
        out_q.append(rows[r])
        out_n.append(first[r, rank])
    qi, n = np.concatenate(out_q), np.concatenate(out_n)
    need = masks[qi] & ~masks[n]          # d = set(x) - set(xp), per (x, xp)
    has_need = popcount(need) > 0
    qi, n, need = qi[has_need], n[has_need], need[has_need]
    if not len(qi):
        return qi, n, n
    unique_need, need_id = np.unique(need, axis=0, return_inverse=True)
    need_id = need_id.reshape(-1)
    # per distinct d: the shortest covering data (2 spare for excluding x and xp)
    spare = SECOND_PROTOTYPES + 2
    shortest = np.full((len(unique_need), min(spare, size)), -1, dtype=np.int64)
    for start in range(0, len(unique_need), BLOCK):
        block = unique_need[start:start + BLOCK]
        rows = np.arange(start, start + len(block))
        cover = popcount(block[:, None, :] & ~masks[None, :, :]) == 0
        keys = _ranked_keys(seed, 1, rows[:, None], cols[None, :],
                            np.broadcast_to(sets.lengths[None, :], cover.shape))
        picked, valid = smallest_keys(keys, cover, spare)
        shortest[rows] = np.where(valid, picked, -1)
    cand = shortest[need_id]
    keep = (cand >= 0) & (cand != qi[:, None]) & (cand != n[:, None])
    keep &= np.cumsum(keep, axis=1) <= SECOND_PROTOTYPES
    r, c = np.nonzero(keep)
    return qi[r], n[r], cand[r, c]


def _long_long(sets, masks, seed, similarity, max_missing, workers):
    size = len(sets.ids)
    cols = np.arange(size)
    out_q, out_a, out_n, out_l = [], [], [], []
    k = min(LONG_LONG_CANDIDATES, size)
    for start in range(0, size, BLOCK):
        rows = np.arange(start, min(start + BLOCK, size))
        sim, ok = _similar(sets, masks, rows, similarity, workers)
        missing = popcount(masks[rows][:, None, :] & ~masks[None, :, :])
        ok &= (missing >= 1) & (missing <= max_missing)
        keys = _ranked_keys(seed, 2, rows[:, None], cols[None, :], np.rint((1.0 - sim) * _SCALE))
        cand, valid = smallest_keys(keys, ok, k)  # most similar first
        top = min(LONG_LONG_TOP, k)
        need = masks[rows][:, None, :] & ~masks[cand[:, :top]]
        covered = popcount(need[:, :, None, :] & ~masks[cand][:, None, :, :]) == 0
        second = (covered & valid[:, None, :] & valid[:, :top, None]
                  & ~np.eye(top, k, dtype=bool)[None])
        pick = second & (np.cumsum(second, axis=2) <= LONG_LONG_TOP)
        r, a, b = np.nonzero(pick)
        out_q.append(rows[r])
        out_a.append(a)
        out_n.append(cand[r, a])
        out_l.append(cand[r, b])
    qi, a, n, l = (np.concatenate(v) for v in (out_q, out_a, out_n, out_l))
    order = np.lexsort((np.arange(len(qi)), a, qi))
    return qi[order], n[order], l[order]


# ------------------------------------------------------------------ Omega

class GenericPrototypeSet(PrototypeSet):
    """Omega over generic data: ordered pairs ``(i, j)``, ``i != j``, of the two length
    pools; long-long pairs 1 to ``max_missing`` token types apart; with ``any_mask``, only
    tuples whose prototypes hold at least one of its tokens between them."""

    def __init__(self, data, first, second, masks, max_missing=None, any_mask=None, rng=None):
        self.max_missing, self.any_mask = max_missing, any_mask
        first = np.asarray(first, dtype=np.int64)
        if any_mask is not None and second is None:
            first = first[(masks[first] & any_mask).any(-1)]
        super().__init__(data, first, second, masks, rng=rng)

    def _valid(self, firsts: np.ndarray) -> np.ndarray:
        ok = firsts[:, None] != self.second[None, :]
        a, b = self.masks[firsts][:, None, :], self.masks[self.second][None, :, :]
        if self.max_missing is not None:
            missing = popcount(a & ~b)
            ok &= (missing >= 1) & (missing <= self.max_missing)
        if self.any_mask is not None:
            ok &= ((a | b) & self.any_mask).any(-1)
        return ok


def length_cut(mean: float, std: float, cut: str) -> float:
    if cut == "mean":
        return mean
    if cut == "mean+std":
        return mean + std
    if cut == "none":
        return float("inf")
    raise ValueError(f"prototype cut {cut!r}: unknown (valid: mean, mean+std, none)")


def generic_omega(data: Sequence[Sequence[str]], nproto: int, variant: str,
                  lengths: dict, cut: str = "mean+std", rare: Sequence[str] = (),
                  max_missing: int = MAX_MISSING, rng=None) -> GenericPrototypeSet:
    """Sampling-time prototype set of generic data. ``lengths`` holds the mean and std
    of the training triples' prototype lengths (``prototype_lengths``); ``rare``: keep
    only tuples holding one of these tokens (none of them in the data: a ValueError)."""
    data = [list(d) for d in data]
    size = np.array([len(d) for d in data])
    _, _, masks, _, index = encode_sets(data, None)
    any_mask = None
    if rare:
        known = [t for t in rare if t in index]
        if not known:
            raise ValueError(f"{', '.join(rare)}: in no training datum")
        any_mask = EncodedSets([known], dict(index)).masks(masks.shape[1])[0]
    first = np.nonzero(size <= length_cut(*lengths["xp"], cut))[0]
    if nproto in (0, 1):
        return GenericPrototypeSet(data, first, None, masks, any_mask=any_mask, rng=rng)
    second = np.nonzero(size <= length_cut(*lengths["xpp"], cut))[0]
    return GenericPrototypeSet(data, first, second, masks,
                               max_missing if variant == "long-long" else None, any_mask, rng)


def prototype_lengths(triples: pl.DataFrame) -> dict:
    """Mean and std of the prototype lengths of ``triples`` (what Omega's cut reads)."""
    out = {}
    for column in ("xp", "xpp"):
        lens = triples[column].list.len().cast(pl.Float64)
        out[column] = [float(lens.mean() or 0.0), float(lens.std() or 0.0)]
    return out
