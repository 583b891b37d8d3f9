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
    fragments (the T1 side, w = their template count), ``own_members`` (own, f) the
    fragments of every fragment-set class, ``grams`` (f, g0, g1, g2) each fragment's
    span grams."""
    templates: pl.DataFrame
    e_members: pl.DataFrame
    a_members: pl.DataFrame
    own_members: pl.DataFrame
    grams: pl.DataFrame


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
    own_members = pl.DataFrame({"own": own[ta_t[sel]], "f": ta_f[sel]})
    del sel, is_first
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
    grams = pl.DataFrame({"f": np.arange(len(frag_grams)), "g0": frag_grams[:, 0],
                          "g1": frag_grams[:, 1], "g2": frag_grams[:, 2]})
    return JoinTables(templates, e_members, a_members, own_members, grams)


def partition_candidates(templates: pl.DataFrame, e_members: pl.DataFrame, a_members,
                         own_members, grams):
    """Candidate multiset of every class key of ``templates`` (the templates of some
    environment classes; ``e_members`` holds at least those classes' rows): rows
    (key, frag, count) sorted by (key, frag), and the template -> key map. A key's
    candidates depend only on its (E, own), so any split by E gives the same ones."""
    # for a fragment a' of E: the number of T1 (>= 2 fragments) that contain a' and share
    # a fragment with E
    pairs = e_members.join(a_members.select("A", "f"), on="f").select("E", "A").unique()
    counts = (pairs.join(a_members, on="A").group_by("E", "f")
              .agg(pl.col("w").sum().alias("c")))
    keys = templates.select("E", "own").unique().sort("E", "own").with_row_index("key")
    t_key = templates.join(keys, on=["E", "own"]).select("t", "key").sort("t")
    cand = keys.join(counts, on="E")
    # overlap(a', own): a' is one of own, or shares an identical span with every one of own
    g = grams
    chk = (cand.select("key", "own", "f").join(own_members.rename({"f": "b"}), on="own")
           .join(g, on="f").join(g.rename({"f": "b", "g0": "h0", "g1": "h1", "g2": "h2"}), on="b"))
    share = pl.lit(False)
    for i in range(3):
        for j in range(3):
            share = share | ((pl.col(f"g{i}") == pl.col(f"h{j}")) & (pl.col(f"g{i}") >= 0))
    bad = (chk.group_by("key", "f")
           .agg(((pl.col("f") == pl.col("b")).any() | share.all()).alias("overlap"))
           .filter(pl.col("overlap")).select("key", "f"))
    cand = cand.join(bad, on=["key", "f"], how="anti").select("key", "f", "c").sort("key", "f")
    return cand, t_key


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


def draw(cand: pl.DataFrame, t_key: pl.DataFrame, ok_t: np.ndarray, n_keys: int,
          variants: int | DistinctTries | None, seed: int):
    """(template, fragment, index) rows: for each template `variants` draws without
    replacement from its key's candidate multiset, or every candidate once when variants
    is None, or a run of distinct candidates (``DistinctTries``). The draws of a template depend only on the seed, its id and its candidate
    multiset (see ``_uniform``); ``proposal_order`` sorts the rows of any set of
    partitions into the one global order."""
    ck = cand["key"].to_numpy()
    cf = cand["f"].to_numpy()
    cc = cand["c"].to_numpy().astype(np.int64)
    k_start = np.searchsorted(ck, np.arange(n_keys + 1))
    t_all = t_key["t"].to_numpy()
    key_all = t_key["key"].to_numpy()
    n_cand = k_start[key_all + 1] - k_start[key_all]
    sel = ok_t[t_all] & (n_cand > 0)
    t, key = t_all[sel], key_all[sel]
    if isinstance(variants, DistinctTries) and variants.n is not None:
        cnt = k_start[key + 1] - k_start[key]
        start = np.floor(_uniform(t, 0, seed) * cnt).astype(np.int64)
        g, w = segments(np.minimum(cnt, variants.n))
        return t[g], cf[k_start[key][g] + (start[g] + w) % cnt[g]], w
    if variants is None or isinstance(variants, DistinctTries):
        cnt = k_start[key + 1] - k_start[key]
        g, w = segments(cnt)
        return t[g], cf[k_start[key][g] + w], w
    cum = np.cumsum(cc)
    base = np.concatenate([[0], cum])
    lo = k_start[key]
    total = base[k_start[key + 1]] - base[lo]
    drawn = []
    rows_t, rows_f, sub = [], [], []
    for r in range(variants):
        live = total - r > 0
        u_ = np.floor(_uniform(t, r, seed) * np.maximum(total - r, 1)).astype(np.int64)
        target = base[lo] + u_
        idx = np.searchsorted(cum, target, side="right")
        for _ in range(r + 1):          # skip copies already drawn (fixed point)
            s = np.zeros(len(t), np.int64)
            for d in drawn:
                s += d <= idx
            idx = np.searchsorted(cum, target + s, side="right")
        drawn.append(np.where(live, idx, -1))
        rows_t.append(t[live])
        rows_f.append(cf[idx[live]])
        sub.append(np.full(int(live.sum()), r, np.int64))
    return tuple(map(np.concatenate, (rows_t, rows_f, sub)))
