"""The example table every component takes: a Polars DataFrame.

Columns: ``x`` and ``y`` (list[str] tokens; ``x`` is empty for language modelling),
``split`` (str). Morphology tables add ``lemma`` and ``tags``.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from compgen.errors import UserError

SCHEMA = {"x": pl.List(pl.String), "y": pl.List(pl.String), "split": pl.String}


def make_table(
    xs: Sequence[Sequence[str]], ys: Sequence[Sequence[str]], split: str | Sequence[str]
) -> pl.DataFrame:
    splits = [split] * len(xs) if isinstance(split, str) else list(split)
    return pl.DataFrame(
        {"x": [list(x) for x in xs], "y": [list(y) for y in ys], "split": splits}, schema=SCHEMA
    )


def select_split(table: pl.DataFrame, split: str) -> pl.DataFrame:
    names = table["split"].unique(maintain_order=True).to_list()
    if split not in names:
        raise UserError(f"no split '{split}' in the data (have: {', '.join(names)})")
    return table.filter(pl.col("split") == split)


def pairs(table: pl.DataFrame) -> list[tuple[list[str], list[str]]]:
    return list(zip(table["x"].to_list(), table["y"].to_list()))
