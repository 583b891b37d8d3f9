"""Prototype neighbourhoods: which training data a generator may recombine.

A *generative datum* is ``x + ["<sep>"] + y`` (one token list). A neighbourhood triple
``(x, xp, xpp)`` says "learn to write datum x from prototypes xp and xpp". This module
builds the triples the R&R generators train on, the reduced lists for 0/1 prototypes,
and the sampling-time prototype sets Omega:

* SCAN jump ("long-short", :func:`long_short_neighborhood`): a long first prototype that
  differs from x in a few tokens, and a short second prototype close to the tokens x
  has and the first prototype lacks.
* SCAN around_right ("long-long", :func:`long_long_neighborhood`): two long prototypes
  each differing from x by one token type.
* SIGMORPHON (:func:`sig_neighborhoods`): tag-set distances between inflection tables.

Similarity (SCAN) is ``1 - lev(a, b) / max(|a|, |b|)`` over token sequences; ``sim > 0.5``
is tested exactly on integer edit distances (``2 * lev < max``). Every all-pairs score
is computed in blocks with rapidfuzz (``process.cdist``) and numpy; the "random
permutation of the training set" the reference walks for each datum is a per-(datum,
candidate) hash key, so "the first k qualifying items in random order" is the k smallest
keys among the qualifying ones -- the same distribution without a Python loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import polars as pl
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from compgen.data.vocab import SEP

BLOCK = 512  # query rows per all-pairs block (memory ~ BLOCK x |train| x 4 bytes)
SIM = 0.5  # similarity threshold of every SCAN neighbourhood
FIRST_LONG_SHORT = 5  # first prototypes per datum (jump; config max_cnt_nb)
CAP_LONG_SHORT = 3  # second-prototype cap of the jump procedure (see the counter quirk)
CANDIDATES_LONG_LONG = 10
TOP_LONG_LONG = 3
TRIPLE_SCHEMA = {"x": pl.List(pl.String), "xp": pl.List(pl.String), "xpp": pl.List(pl.String)}
_NO_KEY = np.uint64(np.iinfo(np.uint64).max)


def generative_datum(x: Sequence[str], y: Sequence[str]) -> list[str]:
    """One generative datum: ``x + ["<sep>"] + y``."""
    return list(x) + [SEP] + list(y)


# ----------------------------------------------------------------------------- helpers


def _splitmix(z: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser over a uint64 array (wrapping arithmetic): a cheap hash."""
    with np.errstate(over="ignore"):  # wrap-around is the point
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _keys(seed: int, stream: int, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Random order key of candidate ``cols`` for query ``rows`` (broadcast): sorting a
    query's candidates by key is a uniformly random permutation, fixed by (seed, stream)."""
    base = _splitmix(np.array([seed * 4 + stream], dtype=np.uint64))[0]
    rows = np.asarray(rows, dtype=np.uint64)
    cols = np.asarray(cols, dtype=np.uint64)
    return _splitmix(_splitmix(base ^ (rows << np.uint64(32))) ^ cols)


class _Encoded:
    """Token sequences as strings (one character per token id, for rapidfuzz), their
    lengths and token-set bitmasks (uint64 words)."""

    def __init__(self, seqs: Sequence[Sequence[str]], index: dict[str, int]):
        self.ids = [[index.setdefault(t, len(index)) for t in s] for s in seqs]
        self.strings = ["".join(chr(0x100 + i) for i in s) for s in self.ids]
        self.lengths = np.array([len(s) for s in self.ids], dtype=np.int32)

    def masks(self, n_words: int) -> np.ndarray:
        m = np.zeros((len(self.ids), n_words), dtype=np.uint64)
        rows = np.repeat(np.arange(len(self.ids)), self.lengths)
        toks = np.fromiter(
            (t for s in self.ids for t in s), dtype=np.int64, count=int(self.lengths.sum())
        )
        np.bitwise_or.at(
            m, (rows, toks // 64), np.left_shift(np.uint64(1), (toks % 64).astype(np.uint64))
        )
        return m


def _encode(trn, queries):
    index: dict[str, int] = {}
    t = _Encoded(trn, index)
    q = _Encoded(queries, index) if queries is not None else t
    n_words = max(1, (len(index) + 63) // 64)
    return t, q, t.masks(n_words), (q.masks(n_words) if queries is not None else None), index


def _popcount(a: np.ndarray) -> np.ndarray:
    return np.bitwise_count(a).sum(axis=-1)


def _distances(queries: list[str], choices: list[str], cutoff: int, workers: int) -> np.ndarray:
    """Exact Levenshtein distances, or ``cutoff + 1`` where larger than ``cutoff``."""
    return process.cdist(
        queries,
        choices,
        scorer=Levenshtein.distance,
        dtype=np.int32,
        score_cutoff=cutoff,
        workers=workers,
    )


def _close(dist: np.ndarray, qlen: np.ndarray, tlen: np.ndarray) -> np.ndarray:
    """``sim > 0.5 and sim != 1`` from integer distances."""
    longest = np.maximum(qlen[:, None], tlen[None, :])
    return (2 * dist < longest) & (dist != 0)


def _smallest_keys(keys: np.ndarray, ok: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: column ids of the (up to) k qualifying entries with the smallest keys, in
    key order, and a validity mask."""
    k = min(k, keys.shape[1])
    masked = np.where(ok, keys, _NO_KEY)
    part = np.argpartition(masked, k - 1, axis=1)[:, :k]
    order = np.argsort(np.take_along_axis(masked, part, 1), axis=1, kind="stable")
    cols = np.take_along_axis(part, order, 1)
    return cols, np.take_along_axis(ok, cols, 1)


def _gather(seqs: Sequence[Sequence[str]], idx: np.ndarray) -> pl.Series:
    return pl.Series(values=[list(s) for s in seqs], dtype=pl.List(pl.String)).gather(idx)


def _triples(queries, trn, qi, n, l) -> pl.DataFrame:
    return pl.DataFrame(
        {"x": _gather(queries, qi), "xp": _gather(trn, n), "xpp": _gather(trn, l)},
        schema=TRIPLE_SCHEMA,
    )


def _setdiff_strings(query: _Encoded, qi: np.ndarray, other_masks: np.ndarray) -> np.ndarray:
    """``setdiff(query[qi], other)`` per row -- distinct tokens of the query datum absent
    from the other datum, in first-occurrence order -- as comparable strings."""
    width = int(max(1, max((len(dict.fromkeys(s)) for s in query.ids), default=1)))
    distinct = np.full((len(query.ids), width), -1, dtype=np.int64)
    for row, s in enumerate(query.ids):  # once per datum, not per pair
        d = list(dict.fromkeys(s))
        distinct[row, : len(d)] = d
    toks = distinct[qi]
    safe = np.maximum(toks, 0)
    words = np.take_along_axis(other_masks, safe // 64, 1)
    present = ((words >> (safe % 64).astype(np.uint64)) & np.uint64(1)).astype(bool)
    keep = (toks >= 0) & ~present
    order = np.argsort(~keep, axis=1, kind="stable")  # kept tokens first, in order
    toks = np.take_along_axis(np.where(keep, toks, -1), order, 1)
    chars = np.where(toks >= 0, toks + 0x100, 0).astype(np.uint32)
    return chars.view(f"<U{width}").ravel()  # trailing NULs are dropped


# ----------------------------------------------------------------------------- SCAN


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
    t, q, tmask, qmask, _ = _encode(trn, None if queries is None else qs)
    qmask = tmask if qmask is None else qmask
    stream = 0 if queries is None else 1
    cutoff = int(max(t.lengths.max(), q.lengths.max()) // 2)
    all_cols = np.arange(len(trn))
    pair_q, pair_rank, pair_n, pair_c0 = [], [], [], []
    for start in range(0, len(qs), BLOCK):
        rows = np.arange(start, min(start + BLOCK, len(qs)))
        dist = _distances(q.strings[start : rows[-1] + 1], t.strings, cutoff, workers)
        ok = _close(dist, q.lengths[rows], t.lengths)
        keys = _keys(seed, stream, rows[:, None], all_cols[None, :])
        cols, valid = _smallest_keys(keys, ok, FIRST_LONG_SHORT)
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

    d = _setdiff_strings(q, qi, tmask[n])
    unique_d, d_id = np.unique(d, return_inverse=True)
    matches = []
    for start in range(0, len(unique_d), BLOCK):
        block = [s for s in unique_d[start : start + BLOCK]]
        dlen = np.array([len(s) for s in block], dtype=np.int32)
        dist = _distances(block, t.strings, cutoff, workers)
        longest = np.maximum(dlen[:, None], t.lengths[None, :])
        r, l = np.nonzero(2 * dist < longest)  # sim(d, l) > 0.5 (equality allowed)
        matches.append(pl.DataFrame({"d_id": (r + start).astype(np.int64), "l": l}))
    pairs = pl.DataFrame({"qi": qi, "rank": rank, "n": n, "c0": c0, "d_id": d_id.astype(np.int64)})
    joined = pairs.join(pl.concat(matches), on="d_id").filter(
        (pl.col("l") != pl.col("n")) & (pl.col("l") != pl.col("qi"))
    )
    key = _keys(seed, stream, joined["qi"].to_numpy(), joined["l"].to_numpy())
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
    return _triples(qs, trn, kept["qi"].to_numpy(), kept["n"].to_numpy(), kept["l"].to_numpy())


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
    t, q, tmask, qmask, _ = _encode(trn, qs if is_test else None)
    qmask = tmask if qmask is None else qmask
    stream = 2 if is_test else 3
    cutoff = int(max(t.lengths.max(), q.lengths.max()) // 2)
    all_cols = np.arange(len(trn))
    out_q, out_a, out_n, out_l = [], [], [], []
    k = min(CANDIDATES_LONG_LONG, len(trn))
    for start in range(0, len(qs), BLOCK):
        rows = np.arange(start, min(start + BLOCK, len(qs)))
        dist = _distances(q.strings[start : rows[-1] + 1], t.strings, cutoff, workers)
        ok = _close(dist, q.lengths[rows], t.lengths)
        missing = _popcount(qmask[rows][:, None, :] & ~tmask[None, :, :])
        ok &= missing == 1
        if not is_test:
            ok[np.arange(len(rows)), rows] = False
        keys = _keys(seed, stream, rows[:, None], all_cols[None, :])
        cols, valid = _smallest_keys(keys, ok, k)
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
        covered = _popcount(need[:, :, None, :] & ~tmask[cols][:, None, :, :]) == 0
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
            pad = _keys(seed, stream + 4, rows[r] * TOP_LONG_LONG + a, 0) % np.uint64(len(trn))
            out_q.append(rows[r])
            out_a.append(a)
            out_n.append(cols[r, a])
            out_l.append(pad.astype(np.int64))
    qi, a, n, l = (np.concatenate(v) for v in (out_q, out_a, out_n, out_l))
    order = np.lexsort((np.arange(len(qi)), a, qi))  # by query, first prototype, emission
    return _triples(qs, trn, qi[order], n[order], l[order])


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
    or :func:`compgen.data.sigmorphon.default_cache_dir`), keyed by a hash of the data,
    the procedure, ``part`` and ``seed``; ``use_cache=False`` always recomputes.
    """
    import hashlib

    from compgen.data.sigmorphon import default_cache_dir
    from compgen.io import atomic_open

    if part not in ("train", "test"):
        raise ValueError(f"part must be 'train' or 'test', not {part!r}")
    trn = unique_generative_data(table, "train")
    queries = unique_generative_data(table, "test") if part == "test" else None
    long_short = split_name in LONG_SHORT_SPLITS
    digest = hashlib.sha256(repr((long_short, part, seed, trn, queries)).encode()).hexdigest()
    path = Path(cache_dir or default_cache_dir()) / "neighborhoods" / f"{digest[:32]}.parquet"
    if use_cache and path.is_file():
        try:
            return pl.read_parquet(path)
        except (OSError, pl.exceptions.PolarsError):
            pass  # an unreadable cache file is recomputed and replaced
    builder = long_short_neighborhood if long_short else long_long_neighborhood
    triples = builder(trn, seed, queries=queries, workers=workers)
    if use_cache:
        try:
            with atomic_open(path, "wb") as handle:
                triples.write_parquet(handle)
        except OSError:
            pass  # an unwritable cache only costs time
    return triples


def prototype_sets(triples: pl.DataFrame, nproto: int) -> pl.DataFrame:
    """Training list for a generator with ``nproto`` prototypes: columns x and protos
    (list of prototype token lists). 0 -> distinct x (protos empty); 1 -> distinct
    (x, xp); 2 -> every triple. First occurrences are kept, in order."""
    if nproto == 0:
        return (
            triples.select("x")
            .unique(maintain_order=True)
            .with_columns(protos=pl.lit([], dtype=pl.List(pl.List(pl.String))))
        )
    if nproto == 1:
        return (
            triples.select("x", "xp")
            .unique(maintain_order=True)
            .select("x", protos=pl.concat_arr(["xp"]).arr.to_list())
        )
    if nproto == 2:
        return triples.select("x", protos=pl.concat_arr(["xp", "xpp"]).arr.to_list())
    raise ValueError(f"nproto must be 0, 1 or 2, not {nproto}")


# ----------------------------------------------------------------------------- Omega

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
            missing = _popcount(
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
    raise ValueError(f"threshold must be 'mean' or 'mean+std', not {threshold!r}")


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
    says mean + std (``threshold="mean+std"``). For template splits (around_right) a
    pair must also satisfy ``|setdiff(d1, d2)| == 1``. nproto 0 and 1 use single
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
        _, _, masks, _, index = _encode(data, None)
    if cover:
        unknown = [w for w in cover if w not in index]
        if unknown:
            raise ValueError(f"{' '.join(unknown)}: not in the training data, no prototype covers it")
        cover_mask = _Encoded([list(cover)], dict(index)).masks(masks.shape[1])[0]
    if nproto in (0, 1):
        return PrototypeSet(data, first, masks=masks, rng=rng, cover=cover_mask)
    if nproto != 2:
        raise ValueError(f"nproto must be 0, 1 or 2, not {nproto}")
    pp_cut = _length_threshold(triples["xpp"].list.len(), threshold)
    second = np.nonzero(lengths <= pp_cut)[0]
    return PrototypeSet(data, first, second, masks, one_type_apart=template, rng=rng,
                        cover=cover_mask)


# ----------------------------------------------------------------------------- SIGMORPHON


def _tag_masks(tag_lists: Sequence[Sequence[str]]) -> np.ndarray:
    """Tag SETS as uint64 bitmask rows (one bit per distinct tag)."""
    index: dict[str, int] = {}
    enc = _Encoded(tag_lists, index)
    return enc.masks(max(1, (len(index) + 63) // 64))


def _jaccard(counts_a: np.ndarray, counts_b: np.ndarray) -> np.ndarray:
    """Multiset Jaccard similarity |a & b| / |a | b| of character-count rows (all pairs);
    1 for equal strings, 0 if one is empty (float64, so equal ratios compare equal).
    |a & b| = sum_t [a >= t] . [b >= t] over count levels t: one exact matmul per level."""
    inter = np.zeros((len(counts_a), len(counts_b)), dtype=np.float32)
    for level in range(1, int(max(counts_a.max(initial=0), counts_b.max(initial=0))) + 1):
        inter += (counts_a >= level).astype(np.float32) @ (counts_b >= level).astype(np.float32).T
    inter = inter.astype(np.int64)
    union = (
        counts_a.sum(1, dtype=np.int64)[:, None] + counts_b.sum(1, dtype=np.int64)[None, :] - inter
    )
    return np.where(union > 0, inter / np.maximum(union, 1), 0.0)


def _smallest_lex(key: np.ndarray, k: int) -> np.ndarray:
    """Per row, the column ids of the k smallest keys, ties broken by column id (what a
    stable sort gives), without sorting whole rows."""
    kth = np.partition(key, k - 1, axis=1)[:, k - 1 : k]
    r, c = np.nonzero(key <= kth)
    o = np.lexsort((c, key[r, c], r))
    r, c = r[o], c[o]
    pos = np.arange(len(r)) - np.searchsorted(r, r)
    out = np.empty((key.shape[0], k), dtype=np.int64)
    keep = pos < k
    out[r[keep], pos[keep]] = c[keep]
    return out


def sig_neighborhoods(
    tags: Sequence[Sequence[str]],
    lemmas: Sequence[str],
    n_train: int,
    rand: np.random.RandomState,
    neighbors: int = 4,
) -> np.ndarray:
    """Morphology neighbourhoods of the few-shot splits: ``(len(tags), neighbors, 2)``
    index pairs ``[i1, i2]`` into the items, always pointing at training items
    (``0 .. n_train-1``).

    For item i with tag set M: first prototypes are the ``neighbors`` training items
    i1 != i with the smallest ``(|M ^ M1|, jaccard(lemma_i, lemma_i1), i1)``, where
    jaccard is the multiset character *similarity* (so dissimilar lemmas come first)
    and even-numbered items may not use a first prototype with their own tag set. The
    second prototype of (i, i1) is the training item i2 not in {i, i1}, with a tag set
    other than M and M1, covering M together with M1, with the smallest ``|M1 ^ M2|``
    (ties: smaller i2). If there is none, the next best first-stage item takes its place
    and the pair is put in random order.

    ``rand`` is consumed exactly as the reference build script does (a shuffle of the
    first-stage list per item, one two-element permutation per fallback), which matters
    because the few-shot splits chain one RandomState across builds.
    """
    n = len(tags)
    train = np.arange(n_train)
    # distinct tag sets (u of them) and distinct lemmas: scores are computed once per pair
    sets, sid = np.unique(_tag_masks(tags), axis=0, return_inverse=True)
    sid = sid.ravel()
    words, lid = np.unique(np.asarray(lemmas, dtype=object).astype(str), return_inverse=True)
    lid = lid.ravel()
    chars: dict[str, int] = {}
    for word in words:
        for c in word:
            chars.setdefault(c, len(chars))
    counts = np.zeros((len(words), max(1, len(chars))), dtype=np.int16)
    rows = np.repeat(np.arange(len(words)), [len(w) for w in words])
    cols = np.fromiter((chars[c] for w in words for c in w), dtype=np.int64, count=len(rows))
    np.add.at(counts, (rows, cols), 1)
    train_words = np.unique(lid[:n_train])
    jac_u = np.zeros((len(words), len(words)))
    jac_u[:, train_words] = _jaccard(counts, counts[train_words])

    tsid = sid[:n_train]
    same_set = sid[:, None] == tsid[None, :]  # (n, n_train)
    tag_dist = _popcount(sets[:, None, :] ^ sets[None, :, :])[sid][:, tsid]
    jac = jac_u[lid][:, lid[:n_train]]
    allowed = train[None, :] != np.arange(n)[:, None]
    allowed &= ~(same_set & (np.arange(n) % 2 == 0)[:, None])
    first_len = allowed.sum(1)
    if (first_len < max(2, neighbors)).any():
        raise ValueError("too few training items for the neighbourhood")
    # lexicographic (tag distance, jaccard, index): 2*dist + jac keeps the order of the
    # pair exactly (jaccard values in [0, 1] differ by far more than a rounding step),
    # and ties go to the smaller index
    key = np.where(allowed, 2.0 * tag_dist + jac, np.inf)
    order = _smallest_lex(key, max(2, neighbors))
    top = order[:, :neighbors]  # (n, k) = i1
    # second prototype for (M, M1) = (set of i, set of i1): a training tag set S other
    # than M and M1 with M - M1 - S empty and the smallest |M1 ^ S|; among items with
    # that set, the first. (i and i1 need no explicit exclusion: their sets are M, M1.)
    first_of = np.full(len(sets), n_train, dtype=np.int64)
    np.minimum.at(first_of, tsid, train)
    cand = np.nonzero(first_of < n_train)[0]  # train sets
    pair, pair_id = np.unique(
        np.stack([np.repeat(sid, neighbors), sid[top].ravel()], 1), axis=0, return_inverse=True
    )
    a, b = sets[pair[:, 0]], sets[pair[:, 1]]
    ok = (
        (cand[None, :] != pair[:, :1])
        & (cand[None, :] != pair[:, 1:])
        & (_popcount(a[:, None, :] & ~b[:, None, :] & ~sets[cand][None, :, :]) == 0)
    )
    score = _popcount(b[:, None, :] ^ sets[cand][None, :, :]) * (n_train + 1) + first_of[cand]
    best = first_of[cand][np.argmin(np.where(ok, score, np.iinfo(np.int64).max), axis=1)]
    has_second = ok.any(1)[pair_id.ravel()].reshape(n, neighbors)
    second = best[pair_id.ravel()].reshape(n, neighbors)
    # fallback partner: the best first-stage item other than i1
    fallback = np.where(np.arange(neighbors)[None, :] == 0, order[:, 1:2], order[:, :1])
    out = np.stack([top, np.where(has_second, second, fallback)], axis=-1)

    buffer = np.empty(n_train)
    for i in range(n):  # replay the reference's RNG consumption, in order
        rand.shuffle(buffer[: first_len[i]])
        for k in np.nonzero(~has_second[i])[0]:
            if rand.permutation(2)[0] == 1:
                out[i, k] = out[i, k, ::-1]
    return out


def rare_tags(train_table: pl.DataFrame, choice: str = "data") -> list[str]:
    """Rare tags of a morphology training table (column ``tags``).

    ``choice="data"`` (reference default): tags occurring more than once and at most 20
    times over all training tag lists whose first character is uppercase (numeric tags
    such as ``3`` never qualify). ``choice="fixed"``: the paper-final fixed set
    ``["FUT", "PST"]``.
    """
    if choice == "fixed":
        return ["FUT", "PST"]
    if choice != "data":
        raise ValueError(f"rare-tag choice must be 'data' or 'fixed', not {choice!r}")
    counts = train_table.select(
        pl.col("tags").list.explode(keep_nulls=False, empty_as_null=False)
    ).to_series()
    counts = counts.value_counts()
    rare = counts.filter(
        (pl.col("count") > 1) & (pl.col("count") <= 20) & pl.col("tags").str.contains(r"^\p{Lu}")
    )
    return sorted(rare["tags"].to_list())


class PrototypeList:
    """An explicit prototype set: index tuples into ``data``, drawn as
    ``cycle(shuffle(list))`` (same interface as :class:`PrototypeSet`)."""

    def __init__(self, data, tuples: np.ndarray, rng=None):
        self.data = [list(d) for d in data]
        self.tuples = np.asarray(tuples, dtype=np.int64).reshape(len(tuples), -1)
        self.rng = np.random.default_rng(rng)
        self._order = None
        self._cursor = 0

    def __len__(self) -> int:
        return len(self.tuples)

    @property
    def nproto(self) -> int:
        return self.tuples.shape[1]

    def indices(self, n: int) -> tuple[np.ndarray, np.ndarray | None]:
        if not len(self.tuples):
            raise ValueError("the prototype set is empty")
        if self._order is None:
            self._order = self.rng.permutation(len(self.tuples))
        pos = (self._cursor + np.arange(n)) % len(self.tuples)
        self._cursor = int((self._cursor + n) % len(self.tuples))
        chosen = self.tuples[self._order[pos]]
        return chosen[:, 0], (chosen[:, 1] if self.nproto == 2 else None)

    def sample(self, n: int) -> list[tuple[list[str], ...]]:
        i, j = self.indices(n)
        if j is None:
            return [(self.data[a],) for a in i]
        return [(self.data[a], self.data[b]) for a, b in zip(i, j)]


SIG_OMEGA_ROUNDS = 100  # |val_hard|: rounds of 4 pairs around a random rare-tag item


def sig_omega(
    train_table: pl.DataFrame, nproto: int, rare_token: bool = True, rng=None, rare: str = "data"
) -> PrototypeList:
    """Sampling-time prototype set for morphology: tuples of generative data
    (``x <sep> y`` of the training rows, reinflection order).

    * nproto 2 with ``rare_token`` (every reference run): 100 rounds; each draws a
      random training item i1 with a rare tag (:func:`rare_tags`, ``rare`` choice) and
      finds the two items i2, i3 sorted first by (tag list differs from i1's -- on odd
      rounds an identical tag list is allowed to sort first --, most shared tags); ties
      are broken at random. Each round adds (i1,i2), (i1,i3), (i2,i1), (i3,i1): 400 pairs.
    * nproto 2 without ``rare_token``: every ordered pair whose tag sets differ in 1 or
      2 tags.
    * nproto 0 or 1: every training item alone.
    """
    rng = np.random.default_rng(rng)
    data = [
        generative_datum(x, y)
        for x, y in zip(train_table["x"].to_list(), train_table["y"].to_list())
    ]
    n = len(data)
    if nproto in (0, 1):
        return PrototypeList(data, np.arange(n)[:, None], rng)
    if nproto != 2:
        raise ValueError(f"nproto must be 0, 1 or 2, not {nproto}")
    tags = train_table["tags"].to_list()
    masks = _tag_masks(tags)
    if not rare_token:
        diff = _popcount(masks[:, None, :] ^ masks[None, :, :])
        i, j = np.nonzero((diff > 0) & (diff <= 2))
        return PrototypeList(data, np.stack([i, j], 1), rng)
    rare_set = set(rare_tags(train_table, rare))
    weird = np.array([k for k, t in enumerate(tags) if rare_set & set(t)], dtype=np.int64)
    if not len(weird):
        raise ValueError("no training item has a rare tag")
    first = rng.choice(weird, size=SIG_OMEGA_ROUNDS)
    allow_exact = (np.arange(1, SIG_OMEGA_ROUNDS + 1) % 2 == 1)[:, None]
    bundle = np.unique(np.array([";".join(t) for t in tags]), return_inverse=True)[1]
    same_list = bundle[None, :] == bundle[first][:, None]
    shared = _popcount(masks[first][:, None, :] & masks[None, :, :])
    key = (~(allow_exact & same_list)).astype(np.float64) * 1e6 - shared
    key = key + rng.random(key.shape) * 0.5  # random tie-break, order kept
    key[np.arange(SIG_OMEGA_ROUNDS), first] = np.inf
    best = np.argsort(key, axis=1)[:, :2]
    i1, i2, i3 = first, best[:, 0], best[:, 1]
    pairs = np.stack(
        [
            np.stack([i1, i2], 1),
            np.stack([i1, i3], 1),
            np.stack([i2, i1], 1),
            np.stack([i3, i1], 1),
        ],
        1,
    ).reshape(-1, 2)
    return PrototypeList(data, pairs, rng)
