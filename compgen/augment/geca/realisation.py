"""Realisation: proposals (template, fragment) turned into hashed examples, the novel ones
kept, then the kept ones turned back into tokens."""

from __future__ import annotations

import numpy as np

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
    if not len(ts):
        return [], [], [], []
    r_inst, r_pos, r_len, r_k = rep_rows(u, rep_units[ts])
    r_start = np.searchsorted(r_inst, np.arange(len(ts) + 1))
    return materialize_rows(c, u.ex[rep_units[ts, 0]], r_start[:-1], r_start[1:], r_pos, r_len,
                            r_k, frag_grams, gram_len, gram_rep, fs)


def materialize_rows(c, exs, starts, ends, r_pos, r_len, r_k, frag_grams, gram_len, gram_rep, fs):
    """Token lists, template text and fragment text of proposals i whose template is
    example exs[i] with the replaced occurrences rows starts[i]..ends[i] (global
    positions r_pos, lengths r_len, span index r_k) filled with fragment fs[i]."""
    vocab = c.vocab + ["##", "<s>", "</s>"] + [f"WUG{k}" for k in range(8)]
    flat = c.flat
    xs, ys, templs, frags = [], [], [], []
    for ex, lo_r, hi_r, f in zip(np.asarray(exs).tolist(), np.asarray(starts).tolist(),
                                 np.asarray(ends).tolist(), np.asarray(fs).tolist()):
        lo, hi = int(c.off[ex]), int(c.off[ex + 1])
        seq, tmpl = [], []
        p = lo + 1
        for j in range(lo_r, hi_r):
            pos, k = int(r_pos[j]), int(r_k[j])
            seq += flat[p:pos].tolist()
            tmpl += flat[p:pos].tolist()
            gram = frag_grams[f, k]
            start = int(gram_rep[gram])
            seq += flat[start: start + int(gram_len[gram])].tolist()
            tmpl.append(c.wug0 + k)
            p = pos + int(r_len[j])
        seq += flat[p: hi - 1].tolist()
        tmpl += flat[p: hi - 1].tolist()
        cut = seq.index(c.sep)
        xs.append([vocab[t_] for t_ in seq[:cut]])
        ys.append([vocab[t_] for t_ in seq[cut + 1:]])
        cut_t = tmpl.index(c.sep)
        templs.append((" ".join(vocab[t_] for t_ in tmpl[:cut_t]),
                       " ".join(vocab[t_] for t_ in tmpl[cut_t + 1:])))
        spans = [g for g in frag_grams[f].tolist() if g >= 0]
        frags.append(" | ".join(" ".join(vocab[t_] for t_ in
                                         flat[gram_rep[g]: gram_rep[g] + gram_len[g]].tolist())
                                for g in spans))
    return xs, ys, templs, frags
