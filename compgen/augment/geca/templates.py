"""Templates: each (example, fragment) instance with its spans replaced by wugs,
identified by hashes (a cheap pre-hash first, exact hashes only on collisions)."""

from __future__ import annotations

import numpy as np

from compgen.augment.geca.arrays import segments, unique
from compgen.augment.geca.extraction import Corpus, Units
from compgen.augment.geca.hashing import U64, Hasher, mix


def rep_rows(u: Units, inst_units: np.ndarray):
    """Replaced occurrences of every instance's spans, sorted by (instance, position):
    (row instance, global position, length, span index k)."""
    insts, ks, poss = [], [], []
    for k in range(inst_units.shape[1]):
        uk = inst_units[:, k]
        has = uk >= 0
        cnt = np.where(has, u.rep_start[np.maximum(uk, 0) + 1] - u.rep_start[np.maximum(uk, 0)], 0)
        g, w = segments(cnt)
        insts.append(g)
        ks.append(np.full(len(g), k, np.int64))
        poss.append(u.rep_pos[u.rep_start[uk[g]] + w])
    inst = np.concatenate(insts)
    pos = np.concatenate(poss)
    k = np.concatenate(ks)
    order = np.argsort(inst * (int(pos.max(initial=0)) + 1) + pos, kind="stable")
    inst, pos, k = inst[order], pos[order], k[order]
    length = u.length[inst_units[inst, k]]
    return inst, pos, length, k


def template_keys(c: Corpus, u: Units, hasher: Hasher, inst_units: np.ndarray,
                   chunk: int = 1_500_000) -> np.ndarray:
    keys = np.empty(len(inst_units), U64)
    wug_h = [h.hv[c.wug0: c.wug0 + 3] for h in hasher.h]
    for begin in range(0, len(inst_units), chunk):
        part = inst_units[begin: begin + chunk]
        ex = u.ex[part[:, 0]]
        lo, hi = c.off[ex], c.off[ex + 1]
        inst, pos, length, k = rep_rows(u, part)
        rh = (wug_h[0][k], wug_h[1][k])
        keys[begin: begin + chunk] = hasher.rewrites(lo, hi, inst, pos, length, rh,
                                                     np.ones(len(inst), np.int64))
    return keys


def prehash(c: Corpus, u: Units, hasher: Hasher, inst_units: np.ndarray) -> np.ndarray:
    """A cheap necessary condition for two instances to have the same template, O(1) per
    instance: hashes of the template's token multiset, its length, the tokens before its
    first hole and those after its last hole."""
    tok = mix(np.arange(c.wug0 + 8, dtype=U64) * U64(0x2545F4914F6CDD1D))
    pref = np.concatenate([np.zeros(1, U64), np.cumsum(tok[c.flat], dtype=U64)])
    total = pref[c.off[1:]] - pref[c.off[:-1]]
    n_rep = (u.rep_start[1:] - u.rep_start[:-1]).astype(np.int64)
    gram_sum = pref[u.first + u.length] - pref[u.first]
    last_end = u.rep_pos[u.rep_start[1:] - 1] + u.length
    ex = u.ex[inst_units[:, 0]]
    h = total[ex]
    length = (c.off[ex + 1] - c.off[ex]).astype(np.int64)
    begin = np.full(len(ex), np.iinfo(np.int64).max)
    end = np.zeros(len(ex), np.int64)
    for k in range(inst_units.shape[1]):
        # per-unit values with a trailing neutral entry, picked by index -1 (no span)
        delta = np.append(n_rep.astype(U64) * (tok[c.wug0 + k] - gram_sum), U64(0))
        shrink = np.append(n_rep * (u.length - 1), 0)
        first = np.append(u.first, np.iinfo(np.int64).max)
        stop = np.append(last_end, 0)
        uk = inst_units[:, k]
        h = h + delta[uk]
        length -= shrink[uk]
        np.minimum(begin, first[uk], out=begin)
        np.maximum(end, stop[uk], out=end)
    poly = hasher.h[0]
    head = poly.span(c.off[ex], begin - c.off[ex])
    tail = poly.span(end, c.off[ex + 1] - end)
    return h ^ mix(length.astype(U64)) ^ mix(head ^ U64(0x51)) * U64(3) ^ mix(tail)


def template_ids(c, u, hasher, inst, fkey, keep_all: bool):
    """Template id of every instance, the number of distinct templates, and which
    instances matter for generation.

    Exact (hashed) templates are computed only for instances whose cheap multiset hash is
    shared with another instance; an instance with a unique one has a template of its own
    (so with a single fragment). A template matters if it has >= 2 fragments (it can
    supply candidates) or, with template_sim none, if one of its fragments is in such a
    template (it can receive them). With window similarity every template is kept."""
    n = len(inst)
    if keep_all:
        shared = np.ones(n, bool)
    else:
        _, _, pinv = unique(prehash(c, u, hasher, inst))
        shared = np.bincount(pinv)[pinv] > 1
    tkey = template_keys(c, u, hasher, inst[shared])
    _, _, tid_shared = unique(tkey)
    n_shared = int(tid_shared.max(initial=-1)) + 1
    inst_t = np.empty(n, np.int64)
    inst_t[shared] = tid_shared
    inst_t[~shared] = n_shared + np.arange(int((~shared).sum()))
    n_t = n_shared + int((~shared).sum())
    if keep_all:
        return inst_t, n_t, np.ones(n, bool)
    idx = np.flatnonzero(shared)
    pairs = unique(tid_shared * (int(fkey.max()) + 1) + fkey[idx])[1]   # distinct (t, f)
    mult = np.bincount(tid_shared[pairs], minlength=n_shared)
    donors = np.unique(fkey[idx[pairs][mult[tid_shared[pairs]] > 1]])
    receiving = np.isin(fkey, donors)
    t_recv = np.zeros(n_t, bool)
    t_recv[inst_t[receiving]] = True
    keep = t_recv[inst_t] | (shared & (np.concatenate([mult, np.zeros(n_t - n_shared, np.int64)])[inst_t] > 1))
    return inst_t, n_t, keep
