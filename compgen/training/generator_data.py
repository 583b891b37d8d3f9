"""Generator training data: (x, prototypes) items from a data set's neighbourhoods.

scan: the reference's neighbourhoods of every training example, shuffled and cut into
floor(0.9 n) train / floor(0.1 n) dev; sigmorphon: the few-shot splits' stored
neighbourhoods (train split for training, val_hard for dev); any other data (the user's
x<TAB>y pairs): the similarity-based neighbourhoods of ``compgen.neighborhoods.generic``,
cut like scan's, and a ``snapshot`` of what sampling needs (``neighborhoods.user_data``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from compgen.data.dataset import Dataset, open_dataset
from compgen.data.vocab import Vocab
from compgen.errors import SettingError, UserError
from compgen.models.recombine import collate_prototypes, collate_targets
from compgen.neighborhoods import (
    generative_datum,
    prototype_sets,
    scan_neighborhood,
    unique_generative_data,
)
from compgen.neighborhoods.generic import generic_neighborhood
from compgen.neighborhoods.user_data import make_snapshot


@dataclass
class GeneratorData:
    """Everything training and sampling need: (x, prototypes) lists, vocab, Omega."""
    vocab: Vocab
    train: list          # [(x tokens, [proto tokens, ...]), ...]
    dev: list
    task: str            # "scan" | "sig"
    split_name: str
    table: pl.DataFrame  # the example table (train/test/... rows)
    snapshot: dict | None = None  # user data: recorded in the checkpoint for sampling


def _scan_generator_data(table: pl.DataFrame, split_name: str, nproto: int, seed: int,
                         dev_fraction: float) -> GeneratorData:
    train_rows = table.filter(pl.col("split") == "train")
    vocab = Vocab.from_table(train_rows)
    triples = scan_neighborhood(table, split_name, seed)
    sets = prototype_sets(triples, nproto)
    train, dev = _split_items(list(zip(sets["x"].to_list(), sets["protos"].to_list())), seed,
                              dev_fraction)
    return GeneratorData(vocab, train, dev, "scan", split_name, table)


def sig_triples(table: pl.DataFrame, rows: pl.DataFrame, nproto: int) -> list:
    """Stored few-shot neighbourhoods -> (x, prototypes) items, no deduplication: each
    item yields one entry per stored pair (0-proto: x four times; 1-proto: (x, xp))."""
    data = [generative_datum(x, y) for x, y in zip(table["x"].to_list(), table["y"].to_list())]
    items = []
    for x, y, pairs in zip(rows["x"].to_list(), rows["y"].to_list(), rows["neighbors"].to_list()):
        d = generative_datum(x, y)
        for i1, i2 in pairs:
            items.append((d, [data[i1], data[i2]][:nproto]))
    return items


def _sig_generator_data(table: pl.DataFrame, name: str, nproto: int) -> GeneratorData:
    if "neighbors" not in table.columns:
        raise UserError(f"{name}: no stored neighbourhoods (use a few-shot split such as "
                        "sigmorphon/turkish/hints-8.0)")
    vocab = Vocab.from_table(table)  # the reference builds it from all items of the split
    train = sig_triples(table, table.filter(pl.col("split") == "train"), nproto)
    dev_split = "val_hard" if "val_hard" in table["split"].unique().to_list() else "train"
    dev = sig_triples(table, table.filter(pl.col("split") == dev_split), nproto)
    return GeneratorData(vocab, train, dev, "sig", name, table)


def _split_items(items: list, seed: int, dev_fraction: float) -> tuple[list, list]:
    """The reference's split: shuffle, floor(0.9 n) train / floor(0.1 n) dev."""
    order = np.random.default_rng(seed % 2**64).permutation(len(items))  # signed seed, same bits
    n_train = math.floor((1 - dev_fraction) * len(items))
    n_dev = math.floor(dev_fraction * len(items))
    return ([items[i] for i in order[:n_train]],
            [items[i] for i in order[n_train:n_train + n_dev]])


def user_training_rows(dataset: Dataset) -> pl.DataFrame:
    """The training rows of a user's data set (all rows when it has no ``train`` split)."""
    table = dataset.table
    if "train" in table["split"].unique().to_list():
        table = table.filter(pl.col("split") == "train")
    empty = table.filter((pl.col("x").list.len() == 0) | (pl.col("y").list.len() == 0)).height
    if empty:
        raise SettingError(f"`data` {dataset.name}: {empty} of {table.height} rows have an "
                           "empty input or output; a generator trains on x<TAB>y pairs")
    if table.height < 3:
        raise SettingError(f"`data` {dataset.name}: {table.height} training pairs; a generator "
                           "needs at least 3 to retrieve prototypes")
    return table


def _user_generator_data(dataset: Dataset, nproto: int, seed: int, dev_fraction: float,
                         neighborhood: str, similarity: str, max_missing: int) -> GeneratorData:
    train_rows = user_training_rows(dataset)
    try:
        triples = generic_neighborhood(unique_generative_data(train_rows), seed, neighborhood,
                                       similarity, max_missing)
    except ValueError as exc:
        raise UserError(f"[train] {exc}") from None
    if triples.height == 0:
        raise SettingError(f"`data` {dataset.name}: no datum has a prototype with similarity "
                           f"> 0.5 ({neighborhood}, {similarity}); the data are too unlike each "
                           "other for the recombination recipe")
    sets = prototype_sets(triples, nproto)
    train, dev = _split_items(list(zip(sets["x"].to_list(), sets["protos"].to_list())), seed,
                              dev_fraction)
    return GeneratorData(Vocab.from_table(train_rows), train, dev, "scan", dataset.name,
                         train_rows,
                         make_snapshot(train_rows, triples, neighborhood, similarity, max_missing))


def generator_data(data: Dataset | str, nproto: int, seed: int, dev_fraction: float = 0.1,
                   data_dir=None, neighborhood: str = "long-short",
                   similarity: str = "levenshtein", max_missing: int = 2) -> GeneratorData:
    """Training items of ``data`` (a Dataset, or a name or path read here): SCAN and
    SIGMORPHON by the reference's procedures, anything else (the user's x, y pairs) by the
    generic recipe (``neighborhood``, ``similarity``, ``max_missing``:
    ``compgen.neighborhoods.generic``)."""
    dataset = open_dataset(data, data_dir)
    task = dataset.task
    if task.generator_recipe == "generic":
        return _user_generator_data(dataset, nproto, seed, dev_fraction, neighborhood,
                                    similarity, max_missing)
    if task.scan:
        return _scan_generator_data(dataset.table, task.split, nproto, seed, dev_fraction)
    return _sig_generator_data(dataset.table, dataset.name, nproto)


def encode_items(items: list, vocab: Vocab) -> list:
    return [(vocab.encode(x), [vocab.encode(p) for p in protos]) for x, protos in items]


def make_batch(encoded: list, idx, variant: str, max_len: int):
    chosen = [encoded[i] for i in idx]
    target = collate_targets([x for x, _ in chosen], variant, max_len)
    protos = collate_prototypes([p for _, p in chosen], variant, max_len)
    return target, protos


def epoch_batches(lengths, batch_size: int, seed: int, epoch: int, pool: int) -> list:
    """One epoch's batches of item indices, every item exactly once. ``pool`` > 0:
    length-bucketed: shuffle, sort runs of ``pool`` batches by length, cut them into
    batches and shuffle the batch order (batches then hold similar lengths, so little
    padding); 0: plain shuffled batches. Depends only on (seed, epoch), for resuming."""
    rng = np.random.default_rng([seed % 2**64, epoch])
    order = rng.permutation(len(lengths))
    if pool > 0:
        lengths = np.asarray(lengths)
        run = pool * batch_size  # a multiple of the batch size: only the last batch is short
        order = np.concatenate([chunk[np.argsort(lengths[chunk], kind="stable")]
                                for chunk in np.split(order, range(run, len(order), run))]
                               ) if len(order) else order
    batches = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
    if pool > 0:
        batches = [batches[i] for i in rng.permutation(len(batches))]
    return batches


def batch_lengths(encoded: list) -> np.ndarray:
    """Sort key of each item for length bucketing: its length, then its longest prototype's
    (the decoder's and the encoder's step counts)."""
    longest = max([len(p) for _, protos in encoded for p in protos] + [0]) + 1
    return np.array([len(x) * longest + max([len(p) for p in protos] + [0])
                     for x, protos in encoded])
