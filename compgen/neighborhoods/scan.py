"""SCAN neighbourhoods: long-short (jump), long-long (around_right), and the cached
entry point :func:`scan_neighborhood`."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl

from compgen.data.bitmasks import encode_sets, popcount, setdiff_strings
from compgen.data.sources import default_cache_dir
from compgen.io import atomic_open
from compgen.neighborhoods.random_keys import hash_keys, smallest_keys
from compgen.neighborhoods.similarity import BLOCK, SIM, edit_distances, is_close
from compgen.neighborhoods.triples import TRIPLE_SCHEMA, generative_datum, make_triples
from compgen.system import cache
from compgen.system.memory import check_headroom

FIRST_LONG_SHORT = 5  # first prototypes per datum (jump; config max_cnt_nb)
CAP_LONG_SHORT = 3  # second-prototype cap of the jump procedure (see the counter quirk)
CANDIDATES_LONG_LONG = 10
TOP_LONG_LONG = 3


def long_short_neighborhood(
    data: Sequence[Sequence[str]], seed: int, queries=None, workers: int = 1
) -> pl.DataFrame:
    """SCAN jump neighbourhood ("long-short"): triples ``(x, xp, xpp)`` as a DataFrame
    with list[str] columns x, xp, xpp.

    ``data`` are the (unique) training generative data; neighbourhoods are built for
    ``queries`` (default: ``data`` itself; pass the test data for test triples). For each
    query x, in a random order of ``data``: the first 5 items with ``0.5 < sim < 1`` are
    first prototypes xp (none: one random item). For each xp, ``d = setdiff(x, xp)`` and
    every item l with ``sim(d, l) > 0.5``, ``l != xp`` and ``l != i`` is a second
    prototype, in the same random order.

    Reference quirks kept on purpose: the counter of first prototypes is not reset
    before the second stage, so the cap of 3 second prototypes only bites when fewer
    than 3 first prototypes were found (then it caps the running total, once); ``i`` is
    the index of x in *its own* set, so for test queries the excluded ``l == i`` is an
    unrelated training item. No fallback when no second prototype qualifies.
    """
    trn = list(data)
    qs = trn if queries is None else list(queries)
    if not trn or not qs:
        return pl.DataFrame(schema=TRIPLE_SCHEMA)
    t, q, tmask, qmask, _ = encode_sets(trn, None if queries is None else qs)
    qmask = tmask if qmask is None else qmask
    stream = 0 if queries is None else 1
    cutoff = int(max(t.lengths.max(), q.lengths.max()) // 2)
    all_cols = np.arange(len(trn))
    pair_q, pair_rank, pair_n, pair_c0 = [], [], [], []
    for start in range(0, len(qs), BLOCK):
        rows = np.arange(start, min(start + BLOCK, len(qs)))
        dist = edit_distances(q.strings[start : rows[-1] + 1], t.strings, cutoff, workers)
        ok = is_close(dist, q.lengths[rows], t.lengths)
        keys = hash_keys(seed, stream, rows[:, None], all_cols[None, :])
        cols, valid = smallest_keys(keys, ok, FIRST_LONG_SHORT)
        found = valid.sum(1)
        # no first prototype: one random training item, and the counter stays 0
        fallback = np.argmin(keys, axis=1)
        cols[found == 0, 0] = fallback[found == 0]
        valid[found == 0, 0] = True
        r, rank = np.nonzero(valid)
        pair_q.append(rows[r])
        pair_rank.append(rank)
        pair_n.append(cols[r, rank])
        pair_c0.append(found[r])
    qi, rank, n, c0 = (np.concatenate(a) for a in (pair_q, pair_rank, pair_n, pair_c0))

    d = setdiff_strings(q, qi, tmask[n])
    unique_d, d_id = np.unique(d, return_inverse=True)
    matches = []
    for start in range(0, len(unique_d), BLOCK):
        block = [s for s in unique_d[start : start + BLOCK]]
        dlen = np.array([len(s) for s in block], dtype=np.int32)
        dist = edit_distances(block, t.strings, cutoff, workers)
        longest = np.maximum(dlen[:, None], t.lengths[None, :])
        r, l = np.nonzero(2 * dist < longest)  # sim(d, l) > 0.5 (equality allowed)
        matches.append(pl.DataFrame({"d_id": (r + start).astype(np.int64), "l": l}))
    pairs = pl.DataFrame({"qi": qi, "rank": rank, "n": n, "c0": c0, "d_id": d_id.astype(np.int64)})
    joined = pairs.join(pl.concat(matches), on="d_id").filter(
        (pl.col("l") != pl.col("n")) & (pl.col("l") != pl.col("qi"))
    )
    key = hash_keys(seed, stream, joined["qi"].to_numpy(), joined["l"].to_numpy())
    joined = (
        joined.with_columns(pl.Series("key", key))
        .sort("qi", "rank", "key")
        .with_columns(pos=pl.int_range(1, pl.len() + 1).over("qi"))
    )
    # the counter quirk: the row where c0 + running count hits 3 ends its own xp group
    cut = joined.filter(pl.col("c0") + pl.col("pos") == CAP_LONG_SHORT).select(
        "qi", cut_rank="rank", cut_pos="pos"
    )
    kept = joined.join(cut, on="qi", how="left").filter(
        pl.col("cut_rank").is_null()
        | (pl.col("rank") != pl.col("cut_rank"))
        | (pl.col("pos") <= pl.col("cut_pos"))
    )
    return make_triples(qs, trn, kept["qi"].to_numpy(), kept["n"].to_numpy(), kept["l"].to_numpy())


def long_long_neighborhood(
    data: Sequence[Sequence[str]], seed: int, queries=None, workers: int = 1
) -> pl.DataFrame:
    """SCAN around_right neighbourhood ("long-long"): triples ``(x, xp, xpp)``.

    For each query x: the first 10 items of ``data`` in random order with
    ``0.5 < sim < 1`` and exactly one token type of x missing from them
    (``|setdiff(x, item)| == 1``) are candidates, ordered by similarity (descending,
    ties in random order). Each of the top 3 is a first prototype xp; its second
    prototypes are the top 3 *other candidates* l (``l != i``) covering what xp lacks
    (``setdiff(setdiff(x, xp), l)`` empty). At most 9 triples per x.

    Training queries without a candidate, and (xp) without a second prototype, yield
    nothing. For test queries (``queries`` given) the reference pads instead: no
    candidate -> one random first prototype; no second -> one random second prototype;
    and ``l != i`` compares with the test index (kept quirk).
    """
    trn = list(data)
    is_test = queries is not None
    qs = list(queries) if is_test else trn
    if not trn or not qs:
        return pl.DataFrame(schema=TRIPLE_SCHEMA)
    t, q, tmask, qmask, _ = encode_sets(trn, qs if is_test else None)
    qmask = tmask if qmask is None else qmask
    stream = 2 if is_test else 3
    cutoff = int(max(t.lengths.max(), q.lengths.max()) // 2)
    all_cols = np.arange(len(trn))
    out_q, out_a, out_n, out_l = [], [], [], []
    k = min(CANDIDATES_LONG_LONG, len(trn))
    for start in range(0, len(qs), BLOCK):
        rows = np.arange(start, min(start + BLOCK, len(qs)))
        dist = edit_distances(q.strings[start : rows[-1] + 1], t.strings, cutoff, workers)
        ok = is_close(dist, q.lengths[rows], t.lengths)
        missing = popcount(qmask[rows][:, None, :] & ~tmask[None, :, :])
        ok &= missing == 1
        if not is_test:
            ok[np.arange(len(rows)), rows] = False
        keys = hash_keys(seed, stream, rows[:, None], all_cols[None, :])
        cols, valid = smallest_keys(keys, ok, k)
        longest = np.maximum(q.lengths[rows][:, None], t.lengths[cols])
        sim = 1.0 - np.take_along_axis(dist, cols, 1) / longest
        empty = ~valid.any(1)
        if is_test:  # test only: one random candidate (it has no possible second)
            fallback = np.argmin(keys, axis=1)
            cols[empty, 0] = fallback[empty]
            valid[empty, 0] = True
            sim[empty, 0] = 2.0  # sorts first; never a second prototype (it is xp itself)
        order = np.argsort(np.where(valid, -sim, np.inf), axis=1, kind="stable")
        cols, valid, sim = (np.take_along_axis(a, order, 1) for a in (cols, valid, sim))
        top = min(TOP_LONG_LONG, cols.shape[1])
        # second[r, a, b]: candidate b is a second prototype for first prototype a
        need = qmask[rows][:, None, :] & ~tmask[cols[:, :top]]
        covered = popcount(need[:, :, None, :] & ~tmask[cols][:, None, :, :]) == 0
        second = (
            covered
            & valid[:, None, :]
            & valid[:, :top, None]
            & (cols[:, None, :] != rows[:, None, None])
            & (sim[:, None, :] > SIM)
            & ~np.eye(top, cols.shape[1], dtype=bool)[None]
        )
        rank = np.cumsum(second, axis=2)
        pick = second & (rank <= TOP_LONG_LONG)
        r, a, b = np.nonzero(pick)
        out_q.append(rows[r])
        out_a.append(a)
        out_n.append(cols[r, a])
        out_l.append(cols[r, b])
        if is_test:  # a first prototype without a second: pad with a random item
            lonely = valid[:, :top] & ~second.any(2)
            r, a = np.nonzero(lonely)
            pad = hash_keys(seed, stream + 4, rows[r] * TOP_LONG_LONG + a, 0) % np.uint64(len(trn))
            out_q.append(rows[r])
            out_a.append(a)
            out_n.append(cols[r, a])
            out_l.append(pad.astype(np.int64))
    qi, a, n, l = (np.concatenate(v) for v in (out_q, out_a, out_n, out_l))
    order = np.lexsort((np.arange(len(qi)), a, qi))  # by query, first prototype, emission
    return make_triples(qs, trn, qi[order], n[order], l[order])


LONG_SHORT_SPLITS = ("jump", "turn_left", "add_prim")


def unique_generative_data(table: pl.DataFrame, split_name: str = "train") -> list[list[str]]:
    """Distinct ``x <sep> y`` data of one split, in first-occurrence order."""
    part = table.filter(pl.col("split") == split_name)
    data = [generative_datum(x, y) for x, y in zip(part["x"].to_list(), part["y"].to_list())]
    return [list(d) for d in dict.fromkeys(tuple(d) for d in data)]


def scan_neighborhood(
    table: pl.DataFrame,
    split_name: str,
    seed: int,
    part: str = "train",
    workers: int = 1,
    cache_dir=None,
    use_cache: bool = True,
) -> pl.DataFrame:
    """Neighbourhood triples of a SCAN example table (columns x, y, split).

    ``split_name`` is the SCAN split (``jump``/``turn_left`` -> long-short, anything
    else -> long-long). ``part="train"`` gives the training triples; ``part="test"`` the
    triples of the unique test data against the training data (for a test perplexity).
    Results are cached as Parquet under ``<cache>/neighborhoods/`` (cache = ``cache_dir``
    or :func:`compgen.data.sources.default_cache_dir`), keyed by a hash of the data,
    the procedure, ``part`` and ``seed``; ``use_cache=False`` always recomputes.
    """
    if part not in ("train", "test"):
        raise ValueError(f"part must be 'train' or 'test', not {part!r}")
    trn = unique_generative_data(table, "train")
    queries = unique_generative_data(table, "test") if part == "test" else None
    long_short = split_name in LONG_SHORT_SPLITS
    digest = hashlib.sha256(repr((long_short, part, seed, trn, queries)).encode()).hexdigest()
    path = Path(cache_dir or default_cache_dir()) / "neighborhoods" / f"{digest[:32]}.parquet"
    if use_cache and (path.is_file() or path.is_symlink()):
        # a parquet file expands several-fold in memory (measured about 6x for these tables)
        check_headroom(8 * path.stat().st_size, f"the cached neighbourhoods {path}")
        # read once and checked against the record written with it: a file cut short or
        # edited is recomputed, not trained on
        content = cache.verified_bytes(path, "the cached neighbourhoods")
        if content is not None:
            try:
                return pl.read_parquet(io.BytesIO(content))
            except (OSError, pl.exceptions.PolarsError):
                cache.remove(path)  # unreadable although recorded: recomputed and replaced
    builder = long_short_neighborhood if long_short else long_long_neighborhood
    triples = builder(trn, seed, queries=queries, workers=workers)
    if use_cache:
        try:
            with atomic_open(path, "wb") as handle:
                triples.write_parquet(handle)
            cache.record(path)
        except OSError:
            pass  # an unwritable cache only costs time
    return triples
