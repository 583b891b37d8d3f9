"""Which synthetic triples to train on (Samir & Silfverberg 2023, §6 of the spec).

A pool row has a tag bundle and, for the loss-based strategies, an uncertainty score
``nll`` given by a model trained on the gold triples only. Every strategy returns ``k``
distinct row indices of the pool, in the order they were chosen:

* ``random``    k rows uniformly without replacement;
* ``highloss``  the k highest nll (stable ascending sort, the last k);
* ``lowloss``   the k lowest nll (the first k of that sort);
* ``umt`` / ``emt`` (``+loss``) k greedy draws: the pool is ordered by nll descending
  (``+loss``) or shuffled; a tag bundle is chosen -- uniformly among the bundles still in
  the remaining pool (UMT), or as the bundle of a uniformly drawn remaining row (EMT, so
  in proportion to the remaining counts) -- and its first remaining row in pool order is
  taken and removed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compgen.errors import SettingError, UserError

STRATEGIES = ("random", "umt", "emt", "highloss", "lowloss", "umt+loss", "emt+loss")
LOSS_STRATEGIES = frozenset({"highloss", "lowloss", "umt+loss", "emt+loss"})


def check_strategy(name: str) -> str:
    key = name.strip().lower()
    if key not in STRATEGIES:
        raise UserError(f"unknown selection strategy '{name}' (valid: {', '.join(STRATEGIES)})")
    return key


def _greedy_by_tag(tags: Sequence[str], order: np.ndarray, k: int, uniform_tag: bool,
                   rng: np.random.Generator) -> list[int]:
    # one queue per tag bundle, rows in pool order; a head pointer per queue
    names, tag_ids = np.unique(np.asarray(tags, dtype=object)[order], return_inverse=True)
    queues = [order[tag_ids == t] for t in range(len(names))]
    heads = np.zeros(len(names), dtype=np.int64)
    remaining = np.array([len(q) for q in queues], dtype=np.int64)
    live = list(range(len(names)))          # bundles with rows left (UMT draws among these)
    chosen = []
    for _ in range(k):
        if uniform_tag:
            t = live[int(rng.integers(len(live)))]
        else:                                # the bundle of a uniformly drawn remaining row
            r = int(rng.integers(int(remaining.sum())))
            t = int(np.searchsorted(np.cumsum(remaining), r, side="right"))
        chosen.append(int(queues[t][heads[t]]))
        heads[t] += 1
        remaining[t] -= 1
        if remaining[t] == 0:
            live.remove(t)
    return chosen


def select(strategy: str, tags: Sequence[str], k: int, nll: Sequence[float] | None = None,
           seed: int = 0) -> list[int]:
    """Indices of the ``k`` pool rows chosen by ``strategy`` (see the module doc)."""
    strategy = check_strategy(strategy)
    n = len(tags)
    if n == 0:
        raise UserError("the synthetic pool is empty")
    if k < 1:
        raise SettingError(f"`size` must be >= 1 (got {k})")
    if k > n:
        raise SettingError(f"`size` {k} is larger than the pool ({n} rows)")
    scores = None
    if strategy in LOSS_STRATEGIES:
        if nll is None:
            raise SettingError(f"strategy '{strategy}' needs uncertainty scores (`scorer`)")
        scores = np.asarray(nll, dtype=np.float64)
        if scores.shape != (n,):
            raise UserError(f"{len(scores)} uncertainty scores for a pool of {n} rows")
        if not np.isfinite(scores).all():
            raise UserError("uncertainty scores must be finite numbers")
    rng = np.random.default_rng(seed)
    if strategy == "random":
        return [int(i) for i in rng.choice(n, size=k, replace=False)]
    if strategy in ("highloss", "lowloss"):
        ascending = np.argsort(scores, kind="stable")
        part = ascending[-k:] if strategy == "highloss" else ascending[:k]
        return [int(i) for i in part]
    if strategy.endswith("+loss"):
        order = np.argsort(-scores, kind="stable")   # nll descending, ties in pool order
    else:
        order = rng.permutation(n)
    return _greedy_by_tag(tags, order, k, strategy.startswith("umt"), rng)
