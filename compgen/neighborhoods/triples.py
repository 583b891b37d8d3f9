"""Generative data and neighbourhood triples ``(x, xp, xpp)``; the training lists for
0, 1 or 2 prototypes."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from compgen.data.vocab import SEP

TRIPLE_SCHEMA = {"x": pl.List(pl.String), "xp": pl.List(pl.String), "xpp": pl.List(pl.String)}


def generative_datum(x: Sequence[str], y: Sequence[str]) -> list[str]:
    """One generative datum: ``x + ["<sep>"] + y``."""
    return list(x) + [SEP] + list(y)


def _gather(seqs: Sequence[Sequence[str]], idx: np.ndarray) -> pl.Series:
    return pl.Series(values=[list(s) for s in seqs], dtype=pl.List(pl.String)).gather(idx)


def make_triples(queries, trn, qi, n, l) -> pl.DataFrame:
    return pl.DataFrame(
        {"x": _gather(queries, qi), "xp": _gather(trn, n), "xpp": _gather(trn, l)},
        schema=TRIPLE_SCHEMA,
    )


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
