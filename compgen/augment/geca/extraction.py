"""From training examples to integer sequences, n-grams (spans) and every
(example, fragment) instance of the reference's recursive enumeration."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from compgen.augment.geca.arrays import cross_chunks, segments, unique
from compgen.augment.geca.config import GecaConfig
from compgen.augment.geca.hashing import U64
from compgen.errors import SettingError


def reference_holdout(table: pl.DataFrame, holdout: int, seed: int) -> pl.DataFrame:
    """The reference SCAN loader's validation hold-out: ``np.random.seed(seed);
    np.random.shuffle(train)`` on the list of examples, then drop the first ``holdout``."""
    if holdout <= 0:
        return table
    if holdout >= table.height:
        raise SettingError(f"`holdout` {holdout} leaves no training examples ({table.height} in data)")
    order = list(range(table.height))
    np.random.RandomState(seed).shuffle(order)
    return table[order[holdout:]]


@dataclass
class Corpus:
    vocab: list[str]
    flat: np.ndarray         # int32 ids of <s> x SEP y </s> for every example, concatenated
    off: np.ndarray          # start of each example in flat (len E+1)
    nx: np.ndarray           # input length of each example
    eligible: np.ndarray     # bool: example gives templates (max_comp_len)
    sep: int
    bos: int
    eos: int
    wug0: int


def encode(table: pl.DataFrame, cfg: GecaConfig) -> Corpus:
    xs, ys = table["x"], table["y"]
    x_tok = xs.list.explode(keep_nulls=False, empty_as_null=False).rename("t")
    y_tok = ys.list.explode(keep_nulls=False, empty_as_null=False).rename("t")
    tokens = pl.concat([x_tok, y_tok])
    vocab = tokens.unique(maintain_order=True).to_list()
    enum = pl.Enum(vocab)
    v = len(vocab)
    sep, bos, eos, wug0 = v, v + 1, v + 2, v + 3
    nx = xs.list.len().to_numpy().astype(np.int64)
    ny = ys.list.len().to_numpy().astype(np.int64)
    n = nx + ny + 3
    off = np.zeros(len(n) + 1, np.int64)
    off[1:] = np.cumsum(n)
    flat = np.empty(int(off[-1]), np.int32)
    flat[off[:-1]] = bos
    flat[off[:-1] + nx + 1] = sep
    flat[off[1:] - 1] = eos
    xid = x_tok.cast(enum).to_physical().to_numpy()
    yid = y_tok.cast(enum).to_physical().to_numpy()
    ex, w = segments(nx)
    flat[off[:-1][ex] + 1 + w] = xid
    ex, w = segments(ny)
    flat[off[:-1][ex] + nx[ex] + 2 + w] = yid
    eligible = np.ones(len(n), bool)
    if cfg.max_comp_len is not None:
        eligible = (nx + 1 + ny) < cfg.max_comp_len
    return Corpus(vocab, flat, off, nx, eligible, sep, bos, eos, wug0)


@dataclass
class Units:
    """Distinct (example, kept n-gram) pairs and their occurrences."""
    ex: np.ndarray
    gram: np.ndarray
    length: np.ndarray
    first: np.ndarray        # global position of first occurrence
    last: np.ndarray         # global position of last occurrence
    occ_pos: np.ndarray      # all occurrences, sorted by (unit, pos)
    occ_start: np.ndarray    # per unit, into occ_pos (len U+1)
    rep_pos: np.ndarray      # replaced (left-to-right non-overlapping) occurrences
    rep_start: np.ndarray
    mask: np.ndarray         # (U, words) uint64 bitmask of the unit's token types
    ex_lo: np.ndarray        # per example: first unit index (len E+1)


def grams(c: Corpus, cfg: GecaConfig):
    """Gram id of every (position, length) window that holds only data tokens, the gram
    table (length, a representative position) and the keep mask (wug_limit)."""
    flat = c.flat
    is_tok = flat < c.sep
    ids_by_len, pos_by_len = [], []
    gram_len, gram_rep = [], []
    n_grams = 0
    prev_id = None
    valid = is_tok.copy()
    for length in range(1, cfg.wug_size + 1):
        if length > 1:
            valid = valid[:-1] & is_tok[length - 1:]
        pos = np.flatnonzero(valid)
        if len(pos) == 0:
            break
        if length == 1:
            key = flat[pos].astype(np.int64)
        else:
            # prev_id is indexed by position (dense array over positions of length-1 windows)
            key = prev_id[pos].astype(np.int64) * (c.sep + 1) + flat[pos + length - 1]
        uniq, first_idx, inv = unique(key)
        gid = inv.astype(np.int64) + n_grams
        dense = np.full(len(flat), -1, np.int64)
        dense[pos] = inv
        prev_id = dense
        ids_by_len.append(gid)
        pos_by_len.append(pos)
        gram_len.append(np.full(len(uniq), length, np.int32))
        gram_rep.append(pos[first_idx])
        n_grams += len(uniq)
    gram_len = np.concatenate(gram_len)
    gram_rep = np.concatenate(gram_rep)
    gids = np.concatenate(ids_by_len)
    gpos = np.concatenate(pos_by_len)
    counts = np.bincount(gids, minlength=n_grams)
    keep = np.ones(n_grams, bool) if cfg.wug_limit is None else counts <= cfg.wug_limit
    return gids, gpos, gram_len, gram_rep, keep


def units(c: Corpus, gids, gpos, gram_len, keep) -> Units:
    n_ex = len(c.off) - 1
    ex_of = np.searchsorted(c.off, gpos, side="right") - 1
    sel = keep[gids] & c.eligible[ex_of]
    gids, gpos, ex_of = gids[sel], gpos[sel], ex_of[sel]
    order = np.argsort(gpos, kind="stable")
    order = order[np.argsort((ex_of * len(gram_len) + gids)[order], kind="stable")]
    gids, gpos, ex_of = gids[order], gpos[order], ex_of[order]
    new = np.ones(len(gids), bool)
    new[1:] = (gids[1:] != gids[:-1]) | (ex_of[1:] != ex_of[:-1])
    starts = np.flatnonzero(new)
    occ_start = np.append(starts, len(gids))
    u_ex, u_gram = ex_of[starts], gids[starts]
    u_len = gram_len[u_gram]
    u_first = gpos[starts]
    u_last = gpos[occ_start[1:] - 1]
    unit_of = np.cumsum(new) - 1
    # replace-all takes occurrences left to right without overlap
    rep = np.ones(len(gids), bool)
    clash = np.zeros(len(gids), bool)
    clash[1:] = (~new[1:]) & (gpos[1:] - gpos[:-1] < u_len[unit_of[1:]])
    for u in np.unique(unit_of[clash]):          # self-overlapping n-grams only (rare)
        end = -1
        for j in range(occ_start[u], occ_start[u + 1]):
            rep[j] = gpos[j] >= end
            if rep[j]:
                end = gpos[j] + u_len[u]
    rep_pos = gpos[rep]
    rep_count = np.bincount(unit_of[rep], minlength=len(starts))
    rep_start = np.concatenate([[0], np.cumsum(rep_count)])
    # per-example local token index -> bitmask of token types of each unit
    ex_all = np.repeat(np.arange(n_ex), np.diff(c.off))
    key = ex_all * (c.wug0 + 1) + c.flat
    uk, _, inv = unique(key)
    ex_first = np.searchsorted(uk, np.arange(n_ex) * (c.wug0 + 1))
    local = inv - ex_first[ex_all]
    words = max(1, int(local.max()) // 64 + 1) if len(local) else 1
    mask = np.zeros((len(starts), words), U64)
    for i in range(int(u_len.max()) if len(u_len) else 0):
        has = u_len > i
        loc = local[u_first[has] + i]
        for w in range(words):
            bits = np.where(loc // 64 == w, U64(1) << (loc % 64).astype(U64), U64(0))
            mask[has, w] |= bits
    ex_lo = np.searchsorted(u_ex, np.arange(n_ex + 1))
    return Units(u_ex, u_gram, u_len, u_first, u_last, gpos, occ_start, rep_pos, rep_start,
                  mask, ex_lo)


def _disjoint(mask: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    both = mask[a] & mask[b]
    return both == 0 if both.ndim == 1 else ~np.any(both, axis=1)


def _count_before(u: Units, rep_key: np.ndarray, unit: np.ndarray, x: np.ndarray, tl: int):
    """Number of replaced occurrences of ``unit`` starting before global position x
    (binary search only for the units that have several)."""
    first = u.rep_pos[u.rep_start[unit]]
    count = (first < x).astype(np.int64)
    multi = np.flatnonzero(u.rep_start[unit + 1] - u.rep_start[unit] > 1)
    if len(multi):
        um = unit[multi]
        count[multi] = np.searchsorted(rep_key, um * tl + x[multi], side="left") - u.rep_start[um]
    return count


def instances(c: Corpus, u: Units, cfg: GecaConfig) -> np.ndarray:
    """Every (example, fragment) the reference's recursive enumeration emits, as an
    (N, 3) array of unit indices (-1 = no span): 1-span, then 2-span, then 3-span."""
    n_units = len(u.ex)
    none = -np.ones(n_units, np.int64)
    out = [np.stack([np.arange(n_units), none, none], 1)]
    if cfg.wug_count < 2 or n_units == 0:
        return out[0]
    m = np.diff(u.ex_lo)
    mask = u.mask[:, 0] if u.mask.shape[1] == 1 else u.mask
    pairs_a, pairs_b = [], []
    for a, b in cross_chunks(u.ex_lo[u.ex], m[u.ex], np.arange(n_units)):
        ok = u.last[b] > u.first[a]       # b found by the scan that starts after a
        a, b = a[ok], b[ok]
        ok = _disjoint(mask, a, b)        # spans share no token type
        pairs_a.append(a[ok])
        pairs_b.append(b[ok])
    pa, pb = np.concatenate(pairs_a), np.concatenate(pairs_b)
    out.append(np.stack([pa, pb, -np.ones(len(pa), np.int64)], 1))
    if cfg.wug_count >= 3 and len(pa):
        tl = len(c.flat) + 1
        occ_key = np.repeat(np.arange(n_units), np.diff(u.occ_start)) * tl + u.occ_pos
        rep_key = np.repeat(np.arange(n_units), np.diff(u.rep_start)) * tl + u.rep_pos
        # first occurrence q0 of b after the first a (where the depth-1 scan found b) and
        # its position j0 in the once-rewritten sequence: the depth-2 scan starts at j0+1
        # of the twice-rewritten sequence (reference quirk, reproduced)
        q0 = u.occ_pos[np.searchsorted(occ_key, pb * tl + u.first[pa], side="right")]
        j0 = q0 - (u.length[pa] - 1) * _count_before(u, rep_key, pa, q0, tl)
        mab = mask[pa] | mask[pb]
        tri = []
        for p, cc in cross_chunks(u.ex_lo[u.ex[pa]], m[u.ex[pa]], np.arange(len(pa))):
            r = u.last[cc]
            ok = r > j0[p]                 # necessary: the rewritten position is <= r
            p, cc, r = p[ok], cc[ok], r[ok]
            both = mask[cc] & mab[p]
            ok = both == 0 if both.ndim == 1 else ~np.any(both, axis=1)
            p, cc, r = p[ok], cc[ok], r[ok]
            a, b = pa[p], pb[p]
            pos2 = (r - (u.length[a] - 1) * _count_before(u, rep_key, a, r, tl)
                    - (u.length[b] - 1) * _count_before(u, rep_key, b, r, tl))
            ok = pos2 >= j0[p] + 1 if cfg.reference_offsets else r > q0[p]
            tri.append(np.stack([a[ok], b[ok], cc[ok]], 1))
        out.append(np.concatenate(tri))
    return np.concatenate(out)
