"""Omega of a generator's data set as a function ``k -> k prototype tuples``: the SCAN and
SIGMORPHON neighbourhoods of the reference, or those recorded for the user's own pairs."""

from __future__ import annotations

import numpy as np
import polars as pl

from compgen import neighborhoods as nb
from compgen.data.resample import scan_rare_phrase, sig_rare_choice
from compgen.data.task import task_of
from compgen.errors import SettingError
from compgen.neighborhoods.user_data import has_snapshot, user_prototype_source


def prototype_source(config: dict, table: pl.DataFrame, nproto: int, seed: int,
                     resample: str = "none", rare: str | None = None,
                     rare_prototypes: bool = False, prototype_cut: str = "mean"):
    """Omega of the checkpoint's data set: a function k -> k prototype tuples.
    ``rare_prototypes`` (SCAN, with rare resampling) keeps only tuples whose prototypes
    contain every word of the rare phrase between them; ``prototype_cut`` (SCAN) is the
    length cut of its prototypes, ``mean`` (the reference's code), ``mean+std`` (the
    paper's text) or ``none`` (any length)."""
    if has_snapshot(config):  # the user's own data: Omega from the recorded pairs
        return user_prototype_source(config, table, nproto, seed, resample, rare,
                                     rare_prototypes, prototype_cut)
    data_name = config["data"]
    rng = np.random.default_rng(seed)
    scan = task_of(data_name).scan
    if rare_prototypes and (resample != "rare" or not scan or nproto == 0):
        raise SettingError("`rare_prototypes`: needs `resample` rare, a SCAN generator and "
                           "prototypes (SIGMORPHON's Omega is already drawn around rare tags)")
    if prototype_cut != "mean" and (not scan or nproto == 0):
        raise SettingError("`prototype_cut`: only SCAN generators with prototypes draw them by "
                           "length (SIGMORPHON's Omega is drawn around rare tags)")
    if nproto == 0:
        return lambda k: [() for _ in range(k)]
    if scan:
        split = data_name.split("/", 1)[1]
        triples = nb.scan_neighborhood(table, split, int(config["train"].get("seed", 0)))
        phrase = scan_rare_phrase(split, rare)
        try:
            omega = nb.scan_omega(nb.unique_generative_data(table), triples, nproto, split,
                                  rng=rng, threshold=prototype_cut,
                                  cover=phrase.split() if rare_prototypes else ())
        except ValueError as e:
            raise SettingError(f"`rare` {phrase}: {e}") from None
        if len(omega) == 0:
            raise SettingError(f"`rare_prototypes`: no prototype tuple contains '{phrase}'")
        return omega.sample
    train = table.filter(pl.col("split") == "train")
    choice, _ = sig_rare_choice(rare)
    return nb.sig_omega(train, nproto, resample == "rare", rng, rare=choice).sample
