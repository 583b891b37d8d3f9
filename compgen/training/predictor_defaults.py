"""The predictor's settings for a user's own data, sized from the data, and the counts of
what a model of some ``max_len`` would cut.

A named set keeps its paper's preset; own data (a file, folder or DataFrame) gets
``sized_preset(table)`` unless a preset is given:

* ``max_len``: the longest training (and dev) input or output, times 1.5 (room for
  outputs a little longer than any seen), at least 16. Nothing of the data is cut.
* supervised copying (``copy_sup``) when outputs reuse their inputs' words: in at least
  ``COPY_SHARE`` of the training pairs some output token also occurs in the input (names
  in semantic parsing, stems in morphology; never in SCAN's commands -> actions).
* H 512, dropout 0.5 (GECA's semantic-parsing predictor); about ``UPDATES`` updates in
  30 to 150 epochs. An epoch is one pass over the training pairs, but at least
  ``EPOCH_BATCHES`` drawn batches (GECA's ``n_epoch_batches``): on a few hundred pairs a
  pass is ~10 batches, and the learning-rate schedule counted in such epochs halved the
  rate every ~100 updates (GeoQuery's SQL query split: 0.15 test exact match after 560
  updates, where 32-batch epochs reach 0.38 after 1,100). The learning rate halves after
  10 epochs without a dev improvement and the run ends with its best dev epoch's weights
  (``restore_best``): on a few hundred pairs the last epoch is often not the best. Dev
  is judged by exact match with token F1 breaking ties: on a held-out dev set of new
  query templates exact match can stay at 0 for dozens of epochs, and halving on it alone
  left the learning rate at 1/8 by epoch 32 of GeoQuery's SQL query split.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import polars as pl

COPY_SHARE = 0.2
UPDATES = 1600
EPOCH_BATCHES = 32
MIN_MAX_LEN = 16


def longest(table: pl.DataFrame) -> int:
    return int(max(table["x"].list.len().max() or 0, table["y"].list.len().max() or 0))


def copy_share(table: pl.DataFrame) -> float:
    """The share of rows some of whose output tokens also occur in their input."""
    if table.height == 0:
        return 0.0
    shared = table.select(pl.col("y").list.set_intersection(pl.col("x")).list.len() > 0)
    return float(shared.to_series().mean())


def sized_preset(table: pl.DataFrame, batch_size: int = 64) -> dict:
    """A seq2seq preset (``{"kind", "model", "train"}``) for ``table``'s data (module doc)."""
    seen = table.filter(pl.col("split").is_in(["train", "dev"]))
    train = table.filter(pl.col("split") == "train")
    batches = max(EPOCH_BATCHES, math.ceil(train.height / batch_size))
    fixed = batches if batches == EPOCH_BATCHES else 0   # 0: an epoch is one pass
    return {
        "kind": "seq2seq",
        "model": {"hidden": 512, "embed": 64, "pdrop": 0.5, "copy": False,
                  "copy_sup": copy_share(train) >= COPY_SHARE,
                  "max_len": max(MIN_MAX_LEN, math.ceil(1.5 * longest(seen)))},
        "train": {"batch_size": batch_size, "lr": 0.001, "gradnorm": 1.0,
                  "epochs": min(150, max(30, math.ceil(UPDATES / batches))),
                  "patience": 10, "lrdecay": 0.5, "dev_fraction": 0.1,
                  "batches_per_epoch": fixed,
                  "restore_best": True, "monitor": "exact_match+f1"},
    }


def too_long(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], max_len: int) -> int:
    """How many (x, y) pairs have a side longer than ``max_len`` tokens (cut by the model)."""
    return sum(1 for x, y in pairs if len(x) > max_len or len(y) > max_len)


def warn_cut(log: Callable[[str], None] | None, what: str, n_cut: int, n: int, max_len: int,
             consequence: str = "cut") -> None:
    """One warning line naming how many of ``what`` exceed ``max_len`` and the option."""
    if log and n_cut:
        log(f"warning: {n_cut:,} of {n:,} {what} are longer than max_len {max_len} tokens and "
            f"are {consequence}; raise it with --max-len (or the preset's model.max_len)")
