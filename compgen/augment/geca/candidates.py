"""Generation: environment classes of templates, the candidate fragments of each template
(joins over fragment-set classes) and the seeded draw of ``variants`` per template."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from compgen.augment.geca.arrays import segments, unique
from compgen.augment.geca.extraction import Corpus, Units
from compgen.augment.geca.hashing import U64, Hasher, mix
from compgen.augment.geca.templates import rep_rows


def _set_hash(group_sorted: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Order-free hash of the set of values of each group (rows sorted by group, distinct)."""
    h = np.zeros(n_groups, U64)
    if len(values):
        starts = np.flatnonzero(np.r_[True, group_sorted[1:] != group_sorted[:-1]])
        h[group_sorted[starts]] = np.add.reduceat(mix(values.astype(U64) + U64(7)), starts)
    return h


def window_classes(c: Corpus, u: Units, hasher: Hasher, rep_units: np.ndarray, w: int) -> np.ndarray:
    """Environment class of each template for template_sim window: templates are similar
    iff the windows T[p-w : p+w+1] around all their wug positions p (in order) are equal.
    The window is clamped at the start (the reference's slice wraps around there)."""
    return unique(window_signatures(c, u, hasher, rep_units, w))[2]


def window_signatures(c: Corpus, u: Units, hasher: Hasher, rep_units: np.ndarray, w: int,
                      chunk: int = 5_000) -> np.ndarray:
    """A hash of each template's windows (the same for equal templates wherever they
    are). Templates are rebuilt as padded token matrices, a chunk of templates at a time."""
    sig = np.zeros(len(rep_units), U64)
    for begin in range(0, len(rep_units), chunk):
        sig[begin: begin + chunk] = _window_signatures(c, u, hasher, rep_units[begin: begin + chunk], w)
    return sig


def _window_signatures(c, u, hasher, rep_units, w):
    n_t = len(rep_units)
    ex = u.ex[rep_units[:, 0]]
    n = (c.off[ex + 1] - c.off[ex]).astype(np.int64)
    width = int(n.max())
    pad, dele = -1, -2
    mat = np.full((n_t, width), pad, np.int32)
    r, col = segments(n)
    mat[r, col] = c.flat[c.off[ex][r] + col]
    inst, pos, length, k = rep_rows(u, rep_units)
    loc = pos - c.off[ex[inst]]
    mat[inst, loc] = c.wug0 + k
    g, within = segments(length - 1)
    mat[inst[g], loc[g] + 1 + within] = dele
    keep = mat >= 0
    newcol = np.cumsum(keep, axis=1, dtype=np.int32) - 1
    tm = np.full((n_t, width), pad, np.int32)
    rows = np.broadcast_to(np.arange(n_t, dtype=np.int32)[:, None], mat.shape)
    tm[rows[keep], newcol[keep]] = mat[keep]
    tlen = keep.sum(1)
    wr, wp = np.nonzero(tm >= c.wug0)
    offs = np.arange(-w, w + 1)
    cols = wp[:, None] + offs[None, :]
    inside = (cols >= 0) & (cols < tlen[wr][:, None])
    win = np.where(inside, tm[wr[:, None], np.clip(cols, 0, width - 1)], c.wug0 + 4)
    # hash each template's sequence of windows (ordered by position)
    flat_tok = win.reshape(-1)
    row_t = np.repeat(wr, 2 * w + 1)
    t_start = np.searchsorted(row_t, np.arange(n_t))
    e = np.arange(len(flat_tok)) - t_start[row_t]
    st = np.flatnonzero(np.r_[True, row_t[1:] != row_t[:-1]])
    sig = np.zeros(n_t, U64)
    for h in hasher.h:
        s = np.zeros(n_t, U64)
        s[row_t[st]] = np.add.reduceat(h.hv[flat_tok] * h.bp[e], st)
        sig = sig * U64(0x9E3779B97F4A7C15) ^ mix(s)
    return sig


@dataclass
class JoinTables:
    """Inputs of the candidate joins. ``templates`` (t, E, own) and ``e_members`` (E, f)
    are split by environment class E into partitions; the others are read whole by
    every partition: ``a_members`` (A, f, w) the fragment-set classes with >= 2
    fragments (the T1 side, w = their template count), ``own_start``/``own_f`` the
    fragments of every fragment-set class (those of class o are
    ``own_f[own_start[o]:own_start[o + 1]]``), ``frag_grams`` (n_f, 3) each fragment's
    span grams (-1: no span)."""
    templates: pl.DataFrame
    e_members: pl.DataFrame
    a_members: pl.DataFrame
    own_start: np.ndarray
    own_f: np.ndarray
    frag_grams: np.ndarray


def join_tables(ta_t, ta_f, n_t, env_class, frag_grams) -> JoinTables:
    """The tables of the candidate joins from the (template, fragment) pairs (sorted by
    template): every template's class key = (environment fragment set E, own fragment
    set own). Built with numpy over the pairs (row order is free: every join result is
    sorted or grouped later)."""
    mult = np.bincount(ta_t, minlength=n_t)
    _, own_first, own = unique(_set_hash(ta_t, ta_f, n_t))
    n_own = len(own_first)
    is_first = np.zeros(n_t, bool)
    is_first[own_first] = True
    sel = is_first[ta_t]
    # pairs sorted by template, and a class's first template in template order: the
    # classes' rows come out sorted by class
    own_of_row, own_f = own[ta_t[sel]], ta_f[sel].astype(np.int64)
    order = np.argsort(own_of_row, kind="stable")
    own_of_row, own_f = own_of_row[order], own_f[order]
    own_start = np.searchsorted(own_of_row, np.arange(n_own + 1))
    own_members = pl.DataFrame({"own": own_of_row, "f": own_f})
    del sel, is_first, order
    weight = np.bincount(own[mult > 1], minlength=n_own)
    a_members = (own_members.rename({"own": "A"})
                 .join(pl.DataFrame({"A": np.flatnonzero(weight), "w": weight[weight > 0]}), on="A"))
    # T2 side: environment = own fragments (none) or those of the window class (window)
    if env_class is None:
        templates = pl.DataFrame({"t": np.arange(n_t), "E": own, "own": own})
        e_members = own_members.rename({"own": "E"})
    else:
        n_f = len(frag_grams)
        wf = unique(env_class[ta_t].astype(np.int64) * n_f + ta_f)[0]   # distinct (win, f)
        win, wf_f = wf // n_f, wf % n_f
        del wf
        wn = int(env_class.max()) + 1
        _, e_first, e_of_win = unique(_set_hash(win, wf_f, wn))
        e_at = np.full(wn, -1, np.int64)
        e_at[e_first] = np.arange(len(e_first))
        sel = e_at[win] >= 0
        e_members = pl.DataFrame({"E": e_at[win[sel]], "f": wf_f[sel]})
        del win, wf_f, sel
        templates = pl.DataFrame({"t": np.arange(n_t), "E": e_of_win[env_class], "own": own})
    return JoinTables(templates, e_members, a_members, own_start, own_f,
                      np.ascontiguousarray(frag_grams, dtype=np.int64))


@dataclass
class KeyCandidates:
    """The candidate multisets of some class keys (E, own), each environment class's
    stored once: ``f``/``c`` the candidates of every E with their counts (sorted by E,
    then f), ``lo``/``hi`` the range of each key's E in them, ``drop_at`` (key * stride +
    position, sorted) the candidates a key drops because they overlap its own fragments,
    ``t``/``key`` every template's key. Storing E's candidates once instead of once per
    key keeps the joins linear in the candidates: an E shared by thousands of keys (a
    common window such as "the _ of") would otherwise copy its list thousands of times."""
    f: np.ndarray
    c: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    drop_at: np.ndarray
    stride: int
    t: np.ndarray
    key: np.ndarray


def _gram_rows(frags: np.ndarray, frag_grams: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row, gram) for every span gram of every fragment in ``frags``."""
    grams = frag_grams[frags]
    row, col = np.nonzero(grams >= 0)
    return row, grams[row, col]


def partition_candidates(templates: pl.DataFrame, e_members: pl.DataFrame, a_members,
                         own_start, own_f, frag_grams) -> KeyCandidates:
    """Candidate multisets of the class keys of ``templates`` (the templates of some
    environment classes; ``e_members`` holds at least those classes' rows). A key's
    candidates depend only on its (E, own), so any split of the keys gives the same ones.

    E's candidates: the fragments a' of the T1 classes (>= 2 fragments) that share a
    fragment with E, counted once per such class with its template count. A key drops
    the a' that overlap own: a' is one of own, or shares an identical span with every
    one of own (found by a join on (E, span gram), so only overlapping pairs are made)."""
    pairs = e_members.join(a_members.select("A", "f"), on="f").select("E", "A").unique()
    counts = (pairs.join(a_members, on="A").group_by("E", "f")
              .agg(pl.col("w").sum().alias("c")).sort("E", "f"))
    del pairs
    keys = templates.select("E", "own").unique().sort("E", "own").with_row_index("key")
    t_key = templates.join(keys, on=["E", "own"]).select("t", "key").sort("t")
    ce = counts["E"].to_numpy()
    cf = counts["f"].to_numpy().astype(np.int64)
    cc = counts["c"].to_numpy().astype(np.int64)
    del counts
    k_e = keys["E"].to_numpy()
    k_own = keys["own"].to_numpy()
    lo = np.searchsorted(ce, k_e, side="left")
    hi = np.searchsorted(ce, k_e, side="right")
    stride = len(cf) + 1
    # own side: (key, E, b, gram) for the fragments b of every key with candidates
    live = np.flatnonzero(hi > lo)
    n_own = own_start[k_own + 1] - own_start[k_own]
    g, w = segments(n_own[live])
    b = own_f[own_start[k_own[live]][g] + w]
    row, gram = _gram_rows(b, frag_grams)
    own_side = pl.DataFrame({"key": live[g][row], "E": k_e[live][g][row], "b": b[row], "gram": gram})
    del g, w, b, row, gram
    row, gram = _gram_rows(cf, frag_grams)
    cand_side = pl.DataFrame({"E": ce[row], "gram": gram, "pos": row, "f": cf[row]})
    del row, gram
    drop = (own_side.join(cand_side, on=["E", "gram"]).select("key", "pos", "b", "f").unique()
            .group_by("key", "pos")
            .agg(pl.len().alias("n_b"), (pl.col("f") == pl.col("b")).any().alias("is_own")))
    del own_side, cand_side
    d_key = drop["key"].to_numpy().astype(np.int64)
    d_pos = drop["pos"].to_numpy().astype(np.int64)
    dropped = drop["is_own"].to_numpy() | (drop["n_b"].to_numpy() == n_own[d_key])
    drop_at = np.sort(d_key[dropped] * stride + d_pos[dropped])
    return KeyCandidates(cf, cc, lo, hi, drop_at, stride,
                         t_key["t"].to_numpy(), t_key["key"].to_numpy().astype(np.int64))



_MASK = (1 << 64) - 1


def _seed_key(seed: int, salt: int) -> U64:
    return U64(((seed + 1) * 0x9E3779B97F4A7C15 ^ salt * 0xC2B2AE3D27D4EB4F) & _MASK)


def _uniform(t: np.ndarray, r: int, seed: int) -> np.ndarray:
    """Uniform [0, 1) value of draw r of template t: a counter-based stream keyed by the
    seed and the template id, so it does not depend on which templates are drawn with it."""
    x = mix(mix(t.astype(U64) ^ _seed_key(seed, 1)) ^ U64(r + 1))
    return (x >> U64(11)).astype(np.float64) * (2.0 ** -53)


def template_rank(t: np.ndarray, seed: int) -> np.ndarray:
    """Seeded random visiting rank of template t (a 64-bit key; ties broken by t)."""
    return mix(t.astype(U64) ^ _seed_key(seed, 2))


def first_novel_per_template(rows_t: np.ndarray, rows_f: np.ndarray, variants: int | None,
                             seed: int) -> np.ndarray:
    """Indices of the novel proposals kept when ``variants`` counts novel examples: at most
    ``variants`` per template, drawn in a seeded order keyed by (template, fragment);
    templates keep the order in which they first appear (their visiting order)."""
    if variants is None or not len(rows_t):
        return np.arange(len(rows_t))
    _, first, tmpl = np.unique(rows_t, return_index=True, return_inverse=True)
    draw_key = mix(mix(rows_t.astype(U64) ^ _seed_key(seed, 3)) ^ rows_f.astype(U64))
    order = np.lexsort((draw_key, first[tmpl]))
    ranked_t = rows_t[order]
    starts = np.flatnonzero(np.r_[True, ranked_t[1:] != ranked_t[:-1]])
    within = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    return np.sort(order[within < variants])


def _nth_kept(kc: KeyCandidates, key: np.ndarray, lo: np.ndarray, idx: np.ndarray,
              first_drop: np.ndarray) -> np.ndarray:
    """The position in E's list of each key's ``idx``-th candidate once its dropped ones
    are left out: the smallest p with p = lo + idx + (drops of the key at or before p),
    reached from below (each pass moves past the drops it has found)."""
    pos = lo + idx
    while True:
        before = np.searchsorted(kc.drop_at, key * kc.stride + pos, side="right") - first_drop
        moved = lo + idx + before
        if np.array_equal(moved, pos):
            return pos
        pos = moved


def proposal_order(rows_t: np.ndarray, sub: np.ndarray, seed: int) -> np.ndarray:
    """Permutation putting proposals in their global order: templates by their seeded
    rank, then the draw (or candidate) index within the template."""
    return np.lexsort((sub, rows_t, template_rank(rows_t, seed)))


@dataclass(frozen=True)
class DistinctTries:
    """The draw of ``novel_variants``: up to ``n`` distinct candidates per template (None =
    all), a run of its candidate list from a seeded start, wrapping around; which of them
    are novel is decided later. The run keeps the proposals of a large data set to
    n per template where all candidates can be a hundred times more."""
    n: int | None


def draw(kc: KeyCandidates, ok_t: np.ndarray, variants: int | DistinctTries | None,
         seed: int):
    """(template, fragment, index) rows: for each template `variants` draws without
    replacement from its key's candidate multiset, or every candidate once when variants
    is None, or a run of distinct candidates (``DistinctTries``). The draws of a template
    depend only on the seed, its id and its candidate multiset (see ``_uniform``); ``proposal_order`` sorts the rows of any set of
    partitions into the one global order.

    A draw picks a point of the key's multiset laid out by fragment; the key's list is
    E's list less the dropped candidates and the copies already drawn, so the point is
    found in E's cumulative counts by skipping what lies before it (a fixed point: each
    pass moves past at least one skipped candidate)."""
    n_keys = len(kc.lo)
    d_key = kc.drop_at // kc.stride
    d_pos = kc.drop_at % kc.stride
    n_drop = np.bincount(d_key, minlength=n_keys)
    n_cand = kc.hi - kc.lo - n_drop
    sel = ok_t[kc.t] & (n_cand[kc.key] > 0)
    t, key = kc.t[sel], kc.key[sel]
    first_drop = np.searchsorted(kc.drop_at, key * kc.stride)
    lo = kc.lo[key]
    if isinstance(variants, DistinctTries) and variants.n is not None:
        cnt = n_cand[key]
        start = np.floor(_uniform(t, 0, seed) * cnt).astype(np.int64)
        g, w = segments(np.minimum(cnt, variants.n))
        pos = _nth_kept(kc, key[g], lo[g], (start[g] + w) % cnt[g], first_drop[g])
        return t[g], kc.f[pos], w
    if variants is None or isinstance(variants, DistinctTries):
        g, w = segments(kc.hi[key] - lo)
        pos = lo[g] + w
        at = key[g] * kc.stride + pos
        j = np.searchsorted(kc.drop_at, at)
        kept = ~np.isin(at, kc.drop_at)
        return t[g][kept], kc.f[pos][kept], (w - (j - first_drop[g]))[kept]
    cum = np.cumsum(kc.c)
    base = np.concatenate([[0], cum])
    drop_base = np.concatenate([[0], np.cumsum(kc.c[d_pos])])
    total = base[kc.hi[key]] - base[lo] - (drop_base[first_drop + n_drop[key]] - drop_base[first_drop])
    drawn = []
    rows_t, rows_f, sub = [], [], []
    for r in range(variants):
        live = np.flatnonzero(total - r > 0)
        u_ = np.floor(_uniform(t[live], r, seed) * (total[live] - r)).astype(np.int64)
        target = base[lo[live]] + u_
        pos = np.searchsorted(cum, target, side="right")
        todo = np.arange(len(live))
        while len(todo):
            i = live[todo]
            at = key[i] * kc.stride + pos[todo]
            skip = drop_base[np.searchsorted(kc.drop_at, at, side="right")] - drop_base[first_drop[i]]
            for d in drawn:
                skip += d[i] <= pos[todo]
            moved = np.searchsorted(cum, target[todo] + skip, side="right")
            changed = moved != pos[todo]
            pos[todo] = moved
            todo = todo[changed]
        d = np.full(len(t), -1, np.int64)
        d[live] = pos
        drawn.append(d)
        rows_t.append(t[live])
        rows_f.append(kc.f[pos])
        sub.append(np.full(len(live), r, np.int64))
    return tuple(map(np.concatenate, (rows_t, rows_f, sub)))
