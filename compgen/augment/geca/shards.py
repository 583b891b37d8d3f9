"""GECA's extraction and realisation by example ranges (shards), so that a memory budget
bounds the whole run and not only the candidate joins.

Shard s holds the examples [lo_s, hi_s) of the encoded corpus (the token ids are global).
Pass 1 writes each shard's distinct n-grams (token tuples, counts, first position) to
Parquet; their merge is the global gram table, numbered as the in-memory run numbers it
(by length, then by token ids), with the global counts for ``wug_limit``. Pass 2 maps
each shard's n-grams to those ids and writes its (example, fragment) instances (template
hash, pre-hash, fragment grams, enumeration order) and, for the first instance of each
template in the shard, the template's replaced occurrences, input/output flags and
window signature. Template hashes are normalised (they do not depend on where the
example is), so the merge, a few Polars group-bys over the instance tables, gives the
template and fragment ids of the in-memory run: shared templates by hash, the others in
enumeration order (span count, then example), fragments by their grams.

Realisation hashes each shard's proposals with the prefix sums of that shard's examples
only, then keeps the novel ones in the global proposal order, as in memory.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from compgen.augment.geca.arrays import segments, unique
from compgen.augment.geca.candidates import window_signatures
from compgen.augment.geca.config import GecaConfig
from compgen.augment.geca.extraction import Corpus, grams, instances, units
from compgen.augment.geca.hashing import U64, Hasher
from compgen.augment.geca.partitions import Execution, current_rss_bytes
from compgen.augment.geca.realisation import materialize_rows, pick_novel
from compgen.augment.geca.templates import prehash, rep_rows, template_keys

# peak bytes of in-memory extraction per corpus token (n-gram windows, units, instances,
# template hashes, the hashers' prefix sums; about 180 B measured at 100k sentences of
# documentation text with the lm preset, rounded up for headroom)
EXTRACTION_BYTES_PER_TOKEN = 320
MAX_SHARDS = 1024


def shard_count(c: Corpus, execution: Execution) -> int:
    """Shards whose extraction fits in what the budget leaves beside the process."""
    if execution.shards is not None:
        return max(1, min(execution.shards, len(c.off) - 1))
    if execution.memory_budget is None:
        return 1
    room = max(execution.memory_budget - current_rss_bytes(), execution.memory_budget // 8)
    need = len(c.flat) * EXTRACTION_BYTES_PER_TOKEN
    return min(MAX_SHARDS, len(c.off) - 1, max(1, math.ceil(need / room)))


def shard_bounds(c: Corpus, n_shards: int) -> list[tuple[int, int]]:
    """Example ranges of about equal token counts."""
    n_ex = len(c.off) - 1
    cuts = np.searchsorted(c.off[:-1], np.linspace(0, c.off[-1], n_shards + 1)[1:-1])
    edges = np.unique(np.concatenate([[0], cuts, [n_ex]])).tolist()
    return list(itertools.pairwise(edges))


def sub_corpus(c: Corpus, lo: int, hi: int) -> Corpus:
    a = int(c.off[lo])
    return Corpus(c.vocab, c.flat[a: int(c.off[hi])], c.off[lo: hi + 1] - a, c.nx[lo:hi],
                  c.eligible[lo:hi], c.sep, c.bos, c.eos, c.wug0)


def _gram_keys(width: int) -> list[str]:
    return ["len"] + [f"t{i}" for i in range(width)]


def _local_grams(cs: Corpus, cfg: GecaConfig, base: int):
    """The shard's n-gram windows and its distinct n-grams as token tuples (-1 padded)."""
    gids, gpos, glen, grep, _ = grams(cs, cfg)
    cols = {"len": glen.astype(np.int8)}
    for i in range(cfg.wug_size):
        has = glen > i
        cols[f"t{i}"] = np.where(has, cs.flat[np.where(has, grep + i, 0)], -1).astype(np.int32)
    cols["count"] = np.bincount(gids, minlength=len(glen))
    cols["rep"] = grep + base
    return pl.DataFrame(cols), gids, gpos


@dataclass
class ShardedTemplates:
    """The active templates and fragments as in memory, and what realisation needs:
    per template its example, its replaced occurrences (offset in the example, length,
    span index; rows r_start[t]..r_start[t+1])."""
    n_t: int
    n_f: int
    ta_t: np.ndarray
    ta_f: np.ndarray
    ok_t: np.ndarray
    env: np.ndarray | None
    frag_grams: np.ndarray
    n_spans_t: np.ndarray
    t_ex: np.ndarray
    r_start: np.ndarray
    r_off: np.ndarray
    r_len: np.ndarray
    r_k: np.ndarray
    gram_len: np.ndarray
    gram_rep: np.ndarray


def _hasher(cs: Corpus, cfg: GecaConfig) -> Hasher:
    # powers for the longest realized example and the longest window sequence (a small
    # shard's own length may be shorter); the hash values do not depend on it
    max_len = int(np.diff(cs.off).max()) * max(cfg.wug_size, 2 * cfg.sim_window_size + 1) + 2
    return Hasher(cs.flat, cs.wug0 + 8, max_len)


def _write_shard(c, cfg, s, lo, hi, mapping, gram_len, keep, folder: Path) -> int:
    """Pass 2 for one shard: its instances and its templates' rows, to Parquet."""
    window = cfg.template_sim == "window"
    cs = sub_corpus(c, lo, hi)
    local, gids, gpos = _local_grams(cs, cfg, 0)
    keys = _gram_keys(cfg.wug_size)
    gmap = (local.select(keys).with_row_index("l").join(mapping, on=keys, how="left")
            .sort("l")["gid"].to_numpy())
    del local
    u = units(cs, gmap[gids], gpos, gram_len, keep)
    del gids, gpos
    inst = instances(cs, u, cfg)
    hasher = _hasher(cs, cfg)
    tkey = template_keys(cs, u, hasher, inst) if len(inst) else np.zeros(0, U64)
    pre = prehash(cs, u, hasher, inst) if len(inst) and not window else np.zeros(len(inst), U64)
    g = np.where(inst >= 0, u.gram[np.maximum(inst, 0)], -1)
    pl.DataFrame({"shard": np.full(len(inst), s, np.int32), "i": np.arange(len(inst)),
                  "n": (inst >= 0).sum(1).astype(np.int8), "tkey": tkey, "pre": pre,
                  "g0": g[:, 0], "g1": g[:, 1], "g2": g[:, 2]}
                 ).write_parquet(folder / f"inst-{s}.parquet")
    del g, pre
    # the first instance of every template of the shard stands for it
    first = unique(tkey)[1]
    rep = inst[first]
    ex = u.ex[rep[:, 0]] if len(rep) else np.zeros(0, np.int64)
    sep_pos = cs.off[ex] + cs.nx[ex] + 1
    valid, uu = rep >= 0, np.maximum(rep, 0)
    sig = (window_signatures(cs, u, hasher, rep, cfg.sim_window_size) if window and len(rep)
           else np.zeros(len(rep), U64))
    pl.DataFrame({"shard": np.full(len(rep), s, np.int32), "tkey": tkey[first], "ex": ex + lo,
                  "has_in": np.any(valid & (u.first[uu] < sep_pos[:, None]), axis=1),
                  "has_out": np.any(valid & (u.last[uu] > sep_pos[:, None]), axis=1),
                  "sig": sig}).write_parquet(folder / f"reps-{s}.parquet")
    ri, pos, length, k = rep_rows(u, rep) if len(rep) else (np.zeros(0, np.int64),) * 4
    pl.DataFrame({"shard": np.full(len(ri), s, np.int32), "tkey": tkey[first][ri],
                  "j": np.arange(len(ri)), "off": pos - cs.off[ex[ri]],
                  "len": np.asarray(length, np.int64), "k": np.asarray(k, np.int64)}
                 ).write_parquet(folder / f"rows-{s}.parquet")
    return len(inst)


def extract_sharded(c: Corpus, cfg: GecaConfig, bounds, folder: Path, stats: dict,
                    say=lambda msg: None) -> ShardedTemplates | None:
    """The active templates and fragments of the in-memory run, computed shard by shard
    (see the module doc); None when there is no instance."""
    keys = _gram_keys(cfg.wug_size)
    for s, (lo, hi) in enumerate(bounds):                       # pass 1: n-grams
        _local_grams(sub_corpus(c, lo, hi), cfg, int(c.off[lo]))[0] \
            .write_parquet(folder / f"grams-{s}.parquet")
    table = (pl.scan_parquet(folder / "grams-*.parquet").group_by(keys)
             .agg(pl.col("count").sum(), pl.col("rep").min()).sort(keys).collect())
    gram_len = table["len"].to_numpy().astype(np.int32)
    gram_rep = table["rep"].to_numpy()
    counts = table["count"].to_numpy()
    keep = np.ones(len(counts), bool) if cfg.wug_limit is None else counts <= cfg.wug_limit
    stats["kept_ngrams"] = int(keep.sum())
    mapping = table.select(keys).with_row_index("gid").with_columns(pl.col("gid").cast(pl.Int64))
    del table, counts
    n_inst = 0
    for s, (lo, hi) in enumerate(bounds):                       # pass 2: instances
        n_inst += _write_shard(c, cfg, s, lo, hi, mapping, gram_len, keep, folder)
        say(f"extraction: shard {s + 1:,} of {len(bounds):,}")
    del mapping
    stats["instances"] = n_inst
    say(f"{n_inst:,} (example, fragment) instances")
    if n_inst == 0:
        return None
    return _merge(cfg, folder, len(bounds), stats, gram_len, gram_rep, say)


def _column(folder: Path, stem: str, n_shards: int, name: str) -> np.ndarray:
    return np.concatenate([pl.read_parquet(folder / f"{stem}-{s}.parquet", columns=[name])
                           [name].to_numpy() for s in range(n_shards)])


def _fragment_keys(g: np.ndarray, n_grams: int) -> np.ndarray:
    """An integer per fragment, ordered as its grams (g0, g1, g2): the in-memory key."""
    bits = max(1, int(n_grams + 1).bit_length())
    if bits * 3 <= 63:
        return ((g[:, 0] + 1) << (2 * bits)) | ((g[:, 1] + 1) << bits) | (g[:, 2] + 1)
    frame = pl.DataFrame({"a": g[:, 0], "b": g[:, 1], "c": g[:, 2]})
    return frame.select(pl.struct("a", "b", "c").rank("dense")).to_series().to_numpy().astype(np.int64)


def _template_ids(folder, n_shards, tkey, fkey, window: bool):
    """Template id of every instance as in memory (``templates.template_ids``: shared
    templates by hash, then the others in enumeration order), the template count and
    which instances are kept."""
    n = len(tkey)
    if window:
        tid = unique(tkey)[2]
        return tid, int(tid.max()) + 1, np.ones(n, bool)
    pinv = unique(_column(folder, "inst", n_shards, "pre"))[2]
    shared = np.bincount(pinv)[pinv] > 1
    del pinv
    idx = np.flatnonzero(shared)
    tid_shared = unique(tkey[idx])[2]
    n_shared = int(tid_shared.max(initial=-1)) + 1
    alone = np.flatnonzero(~shared)
    order = np.lexsort(tuple(_column(folder, "inst", n_shards, c)[alone] for c in ("i", "shard", "n")))
    tid = np.empty(n, np.int64)
    tid[idx] = tid_shared
    tid[alone[order]] = n_shared + np.arange(len(alone))
    n_t = n_shared + len(alone)
    pairs = unique(tid_shared * (int(fkey.max()) + 1) + fkey[idx])[1]   # distinct (t, f)
    mult = np.bincount(tid_shared[pairs], minlength=n_shared)
    donors = np.unique(fkey[idx[pairs][mult[tid_shared[pairs]] > 1]])
    t_recv = np.zeros(n_t, bool)
    t_recv[tid[np.isin(fkey, donors)]] = True
    keep = t_recv[tid] | (shared & (np.concatenate([mult, np.zeros(n_t - n_shared, np.int64)])[tid] > 1))
    return tid, n_t, keep


def _merge(cfg, folder, n_shards, stats, gram_len, gram_rep, say) -> ShardedTemplates:
    """Numbering, as in memory, from the shards' instance tables (numpy over columns read
    one at a time), then the rows of each template from the shard that first holds it."""
    g = np.stack([_column(folder, "inst", n_shards, c) for c in ("g0", "g1", "g2")], 1)
    fkey = _fragment_keys(g, len(gram_len))
    stats["fragments"] = len(unique(fkey)[0])
    tkey = _column(folder, "inst", n_shards, "tkey")
    tid, n_all, keep = _template_ids(folder, n_shards, tkey, fkey, cfg.template_sim == "window")
    stats["templates"] = n_all
    say(f"{n_all:,} templates, {stats['fragments']:,} fragments")
    if not keep.all():
        tid, fkey, tkey, g = tid[keep], fkey[keep], tkey[keep], g[keep]
    shard = _column(folder, "inst", n_shards, "shard")
    n_spans = _column(folder, "inst", n_shards, "n")
    if not keep.all():
        shard, n_spans = shard[keep], n_spans[keep]
    del keep
    # instances are in shard order, so a template's first instance is in its first shard
    _, t_first, inst_t = unique(tid)
    del tid
    _, f_first, inst_f = unique(fkey)
    del fkey
    frag_grams = g[f_first]
    n_t, n_f = len(t_first), len(f_first)
    pair = unique(inst_t * n_f + inst_f)[0]
    del inst_t, inst_f
    stats.update(active_templates=n_t, active_fragments=n_f, template_fragment_pairs=len(pair))
    say(f"{n_t:,} templates and {n_f:,} fragments can take part")
    owner, owner_key, n_spans_t = shard[t_first], tkey[t_first], n_spans[t_first].astype(np.int64)
    del shard, tkey, n_spans, g
    t_ex = np.zeros(n_t, np.int64)
    has_in, has_out = np.zeros(n_t, bool), np.zeros(n_t, bool)
    sig = np.zeros(n_t, U64)
    row_t, row_off, row_len, row_k = [], [], [], []
    for s in range(n_shards):
        mine = np.flatnonzero(owner == s)
        reps = pl.read_parquet(folder / f"reps-{s}.parquet")
        at = np.searchsorted(reps["tkey"].to_numpy(), owner_key[mine])     # reps sorted by tkey
        t_ex[mine] = reps["ex"].to_numpy()[at]
        has_in[mine] = reps["has_in"].to_numpy()[at]
        has_out[mine] = reps["has_out"].to_numpy()[at]
        sig[mine] = reps["sig"].to_numpy()[at]
        rows = pl.read_parquet(folder / f"rows-{s}.parquet")
        r_key = rows["tkey"].to_numpy()                                      # sorted by tkey, j
        lo = np.searchsorted(r_key, owner_key[mine], side="left")
        cnt = np.searchsorted(r_key, owner_key[mine], side="right") - lo
        grp, w = segments(cnt)
        j = lo[grp] + w
        row_t.append(mine[grp])
        row_off.append(rows["off"].to_numpy()[j].astype(np.int32))
        row_len.append(rows["len"].to_numpy()[j].astype(np.int16))
        row_k.append(rows["k"].to_numpy()[j].astype(np.int8))
        del reps, rows
    r_t = np.concatenate(row_t)
    order = np.argsort(r_t, kind="stable")
    r_t = r_t[order]
    env = unique(sig)[2] if cfg.template_sim == "window" else None
    return ShardedTemplates(
        n_t, n_f, pair // n_f, pair % n_f, has_out & (has_in | cfg.output_only), env,
        frag_grams, n_spans_t, t_ex, np.searchsorted(r_t, np.arange(n_t + 1)),
        np.concatenate(row_off)[order], np.concatenate(row_len)[order],
        np.concatenate(row_k)[order], gram_len, gram_rep)


def _gram_hashes(c: Corpus, st: ShardedTemplates, hasher: Hasher):
    """Hash of every gram's tokens as a sequence of its own (what ``Hasher.span`` gives)."""
    out = []
    for h in hasher.h:
        acc = np.zeros(len(st.gram_len), U64)
        for i in range(int(st.gram_len.max(initial=0))):
            has = st.gram_len > i
            acc[has] += h.hv[c.flat[st.gram_rep[has] + i]] * h.bp[i]
        out.append(acc)
    return out


def realize_sharded(c: Corpus, cfg: GecaConfig, bounds, st: ShardedTemplates, rows_t, rows_f,
                    chunk: int = 1_000_000):
    """(template, fragment) of the kept proposals, as ``realisation.realize_and_filter``
    keeps them: each shard hashes the proposals whose template is one of its examples."""
    hx = np.zeros(len(rows_t), U64)
    hy = np.zeros(len(rows_t), U64)
    train_x, train_y = [], []
    lows = np.array([lo for lo, _ in bounds])
    p_shard = np.searchsorted(lows, st.t_ex, side="right")[rows_t] - 1
    gh = None
    empty = np.zeros(0, np.int64)
    no_rows = (empty, empty, empty, (empty.astype(U64), empty.astype(U64)), empty)
    for s, (lo, hi) in enumerate(bounds):
        cs = sub_corpus(c, lo, hi)
        hasher = _hasher(cs, cfg)
        if gh is None:
            gh = _gram_hashes(c, st, hasher)
        lo_x = cs.off[:-1] + 1
        hi_x = lo_x + cs.nx
        lo_y, hi_y = hi_x + 1, cs.off[1:] - 1
        train_x.append(hasher.rewrites(lo_x, hi_x, *no_rows))
        train_y.append(hasher.rewrites(lo_y, hi_y, *no_rows))
        mine = np.flatnonzero(p_shard == s)
        for begin in range(0, len(mine), chunk):
            idx = mine[begin: begin + chunk]
            t, f = rows_t[idx], rows_f[idx]
            g, w = segments(st.r_start[t + 1] - st.r_start[t])
            j = st.r_start[t][g] + w
            ex = st.t_ex[t] - lo
            pos, length, k = cs.off[ex][g] + st.r_off[j], st.r_len[j], st.r_k[j]
            gram = st.frag_grams[f[g], k]
            rh = (gh[0][gram], gh[1][gram])
            rlen = st.gram_len[gram].astype(np.int64)
            in_x = pos < (cs.off[ex] + cs.nx[ex] + 1)[g]
            hx[idx] = hasher.rewrites(lo_x[ex], hi_x[ex], g[in_x], pos[in_x], length[in_x],
                                      (rh[0][in_x], rh[1][in_x]), rlen[in_x])
            hy[idx] = hasher.rewrites(lo_y[ex], hi_y[ex], g[~in_x], pos[~in_x], length[~in_x],
                                      (rh[0][~in_x], rh[1][~in_x]), rlen[~in_x])
        del hasher, cs
    keep = pick_novel(hx, hy, np.unique(np.concatenate(train_x)), np.unique(np.concatenate(train_y)), cfg)
    return rows_t[keep], rows_f[keep]


def materialize_sharded(c: Corpus, st: ShardedTemplates, ts, fs):
    """Token lists of the chosen proposals (``realisation.materialize``)."""
    ts = np.asarray(ts, np.int64)
    lo, hi = st.r_start[ts], st.r_start[ts + 1]
    g, w = segments(hi - lo)
    j = lo[g] + w
    # the chosen templates' rows, renumbered 0.. in order, with global positions
    r_pos = c.off[st.t_ex[ts]][g] + st.r_off[j]
    starts = np.concatenate([[0], np.cumsum(hi - lo)])
    return materialize_rows(c, st.t_ex[ts], starts[:-1], starts[1:], r_pos, st.r_len[j],
                            st.r_k[j], st.frag_grams, st.gram_len, st.gram_rep, fs)
