"""SIGMORPHON prototype lists Omega: rare tags and the pairs sampled around them."""

from __future__ import annotations

import numpy as np
import polars as pl

from compgen.data.bitmasks import popcount, tag_masks
from compgen.neighborhoods.triples import generative_datum


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
    masks = tag_masks(tags)
    if not rare_token:
        diff = popcount(masks[:, None, :] ^ masks[None, :, :])
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
    shared = popcount(masks[first][:, None, :] & masks[None, :, :])
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
