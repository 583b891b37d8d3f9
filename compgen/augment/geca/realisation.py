"""Realisation: proposals (template, fragment) turned into hashed examples, the novel ones
kept, then the kept ones turned back into tokens."""

from __future__ import annotations

import numpy as np
import polars as pl

from compgen.augment.geca.arrays import segments, unique
from compgen.augment.geca.hashing import U64, mix
from compgen.augment.geca.templates import rep_rows


def realize_and_filter(c, u, hasher, data, rep_units, frag_grams, gram_len, gram_rep,
                        rows_t, rows_f, cfg, chunk: int = 1_000_000):
    """Hash the realized input and output of every proposal (template rows filled with the
    fragment's spans), keep the novel ones (per side), first occurrence of each pair, in
    proposal order, stopping once n_sample are found. Returns (template, fragment) arrays."""
    lo_x, hi_x = c.off[:-1] + 1, c.off[:-1] + 1 + c.nx
    lo_y, hi_y = hi_x + 1, c.off[1:] - 1
    empty = np.zeros(0, np.int64)
    no_rows = (empty, empty, empty, (empty.astype(U64), empty.astype(U64)), empty)
    train_x = np.unique(hasher.rewrites(lo_x, hi_x, *no_rows))
    train_y = np.unique(hasher.rewrites(lo_y, hi_y, *no_rows))
    gh = hasher.span(gram_rep, gram_len)
    # replaced occurrences of each template's representative instance
    r_inst, r_pos, r_len, r_k = rep_rows(u, rep_units)
    r_start = np.searchsorted(r_inst, np.arange(len(rep_units) + 1))
    seen = np.zeros(0, U64)
    kept_t, kept_f = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    n_kept = 0
    for begin in range(0, len(rows_t), chunk):
        t, f = rows_t[begin: begin + chunk], rows_f[begin: begin + chunk]
        cnt = r_start[t + 1] - r_start[t]
        g, w = segments(cnt)
        j = r_start[t][g] + w
        pos, length, k = r_pos[j], r_len[j], r_k[j]
        gram = frag_grams[f[g], k]
        rh = (gh[0][gram], gh[1][gram])
        rlen = gram_len[gram].astype(np.int64)
        ex = u.ex[rep_units[t, 0]]
        sep = c.off[ex] + c.nx[ex] + 1
        in_x = pos < sep[g]
        hx = hasher.rewrites(lo_x[ex], hi_x[ex], g[in_x], pos[in_x], length[in_x],
                             (rh[0][in_x], rh[1][in_x]), rlen[in_x])
        hy = hasher.rewrites(lo_y[ex], hi_y[ex], g[~in_x], pos[~in_x], length[~in_x],
                             (rh[0][~in_x], rh[1][~in_x]), rlen[~in_x])
        novel = ~np.isin(hy, train_y)
        if not cfg.output_only:
            novel &= ~np.isin(hx, train_x)
        idx = np.flatnonzero(novel)
        pair_key = hx[idx] ^ mix(hy[idx])
        _, first, _ = unique(pair_key)
        first = np.sort(first)
        idx, pair_key = idx[first], pair_key[first]
        fresh = ~np.isin(pair_key, seen)
        idx, pair_key = idx[fresh], pair_key[fresh]
        if cfg.n_sample is not None:
            room = cfg.n_sample + 16 - n_kept
            idx, pair_key = idx[:room], pair_key[:room]
        seen = np.concatenate([seen, pair_key])
        kept_t.append(t[idx])
        kept_f.append(f[idx])
        n_kept += len(idx)
        if cfg.n_sample is not None and n_kept >= cfg.n_sample + 16:
            break
    return np.concatenate(kept_t), np.concatenate(kept_f)


def pick_novel(hx, hy, train_x, train_y, cfg):
    """Indices of the proposals (hashes in proposal order) that are novel (per side),
    first occurrence of each pair, the first n_sample + 16 of them: what
    ``realize_and_filter`` keeps, over all proposals at once."""
    novel = ~np.isin(hy, train_y)
    if not cfg.output_only:
        novel &= ~np.isin(hx, train_x)
    idx = np.flatnonzero(novel)
    first = np.sort(unique(hx[idx] ^ mix(hy[idx]))[1])
    idx = idx[first]
    return idx if cfg.n_sample is None else idx[: cfg.n_sample + 16]


def materialize(c, u, rep_units, frag_grams, gram_len, gram_rep, ts, fs):
    """Token lists of the chosen (template, fragment) proposals (only the output rows)."""
    r_inst, r_pos, r_len, r_k = rep_rows(u, rep_units[ts])
    r_start = np.searchsorted(r_inst, np.arange(len(ts) + 1))
    return materialize_rows(c, u.ex[rep_units[ts, 0]], r_start[:-1], r_start[1:], r_pos, r_len,
                            r_k, frag_grams, gram_len, gram_rep, fs)


def _nested(row: np.ndarray, n_rows: int, values: pl.Series) -> pl.Series:
    """Values grouped into one list per row (row ids ascending; rows without values get an
    empty list). Built from one flat column: Polars builds nested columns from Python
    lists one inner list at a time (~40 us a row)."""
    nested = pl.DataFrame({"row": row, "v": values}).group_by("row").agg("v")
    return (pl.DataFrame({"row": np.arange(n_rows)}).join(nested, on="row", how="left")
            .sort("row")["v"].fill_null(pl.lit([], dtype=pl.List(values.dtype))))


def _pieces(lo, hi, starts, ends, r_pos, r_len, gram_start, gram_len):
    """Per proposal the pieces (start, length) of its sequence in order: the kept runs of
    its example [lo, hi) and, between them, what replaces each occurrence."""
    m = ends - starts
    g, w = segments(2 * m + 1)
    j = starts[g] + w // 2                     # the row an odd piece fills / an even one follows
    even = w % 2 == 0
    first, last = w == 0, w == 2 * m[g]
    prev = np.maximum(j - 1, 0)
    begin = np.where(first, lo[g], r_pos[prev] + r_len[prev])
    end = np.where(last, hi[g], r_pos[np.minimum(j, len(r_pos) - 1)] if len(r_pos) else hi[g])
    start = np.where(even, begin, gram_start[np.minimum(j, len(r_pos) - 1)] if len(r_pos) else 0)
    length = np.where(even, end - begin, gram_len[np.minimum(j, len(r_pos) - 1)] if len(r_pos) else 0)
    return g, start, length


def materialize_rows(c, exs, starts, ends, r_pos, r_len, r_k, frag_grams, gram_len, gram_rep, fs,
                     chunk: int = 100_000):
    """``materialize_chunk`` over chunks of ``chunk`` proposals (rows of proposal i are
    starts[i]..ends[i], consecutive from starts[0]), so its per-token arrays stay small."""
    exs, starts, ends, fs = (np.asarray(a, np.int64) for a in (exs, starts, ends, fs))
    parts = []
    for a in range(0, max(len(fs), 1), chunk):
        b = min(a + chunk, len(fs))
        r0, r1 = (int(starts[a]), int(ends[b - 1])) if b > a else (0, 0)
        parts.append(materialize_chunk(c, exs[a:b], starts[a:b] - r0, ends[a:b] - r0,
                                       r_pos[r0:r1], r_len[r0:r1], r_k[r0:r1], frag_grams,
                                       gram_len, gram_rep, fs[a:b]))
    if len(parts) == 1:
        return parts[0]
    return tuple(pl.concat([p[i] for p in parts]) for i in range(4))


def materialize_chunk(c, exs, starts, ends, r_pos, r_len, r_k, frag_grams, gram_len, gram_rep, fs):
    """Token lists (x, y: List(String) columns), template text and fragment text of
    proposals i whose template is example exs[i] with the replaced occurrences rows
    starts[i]..ends[i] (global positions r_pos, lengths r_len, span index r_k; sorted by
    position) filled with fragment fs[i]. Numpy over all proposals at once."""
    vocab = pl.Series(c.vocab + ["##", "<s>", "</s>"] + [f"WUG{k}" for k in range(8)],
                      dtype=pl.String)
    exs, starts, ends = (np.asarray(a, np.int64) for a in (exs, starts, ends))
    fs = np.asarray(fs, np.int64)
    n = len(fs)
    r_pos, r_len, r_k = (np.asarray(a, np.int64) for a in (r_pos, r_len, r_k))
    lo, hi = c.off[exs] + 1, c.off[exs + 1] - 1
    row_of = np.repeat(np.arange(n), ends - starts)
    gram = frag_grams[fs[row_of], r_k] if len(r_k) else np.zeros(0, np.int64)
    # the examples: fragment grams in place; the templates: WUGk tokens (appended to flat)
    ext = np.concatenate([c.flat, c.wug0 + np.arange(8, dtype=c.flat.dtype)])
    seqs = []
    for gram_start, glen in ((gram_rep[gram], gram_len[gram]),
                             (len(c.flat) + r_k, np.ones(len(r_k), np.int64))):
        p_row, p_start, p_len = _pieces(lo, hi, starts, ends, r_pos, r_len,
                                        np.asarray(gram_start, np.int64), np.asarray(glen, np.int64))
        g, w = segments(p_len)
        seqs.append((p_row[g], ext[p_start[g] + w]))
    xs_ys = []
    for row, tok in seqs:
        # x is what precedes the first separator, y what follows it
        is_sep = tok == c.sep
        sep_rows, sep_at = unique(row[is_sep])[0:2]
        cut = np.full(n, len(tok), np.int64)
        cut[sep_rows] = np.flatnonzero(is_sep)[sep_at]
        in_x = np.arange(len(tok)) < cut[row]
        in_y = np.arange(len(tok)) > cut[row]
        words = vocab.gather(tok)
        xs_ys.append((_nested(row[in_x], n, words.filter(in_x)),
                      _nested(row[in_y], n, words.filter(in_y))))
    (xs, ys), (tx, ty) = xs_ys
    templates = pl.DataFrame({"x": tx.list.join(" "), "y": ty.list.join(" ")})
    # the fragment: its spans' tokens, spans joined by " | "
    span_f, span_k = np.nonzero(frag_grams[fs] >= 0)
    span_g = frag_grams[fs[span_f], span_k]
    g, w = segments(gram_len[span_g])
    span_text = _nested(g, len(span_g), vocab.gather(c.flat[gram_rep[span_g][g] + w])).list.join(" ")
    frags = _nested(span_f, n, span_text).list.join(" | ")
    return xs, ys, templates, frags
