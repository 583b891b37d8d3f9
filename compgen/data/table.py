"""The example table every component takes: a Polars DataFrame.

Columns: ``x`` and ``y`` (list[str] tokens; ``x`` is empty for language modelling),
``split`` (str). Morphology tables add ``lemma`` and ``tags``.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from compgen.errors import UserError

SCHEMA = {"x": pl.List(pl.String), "y": pl.List(pl.String), "split": pl.String}


# joins the tokens of a row for Polars to split again: building list columns from Python
# lists element by element is 6-7x slower (0.17 against 0.026 s for SCAN jump's train set)
_JOIN = "\x1f"


def token_lists(seqs: Sequence[Sequence[str]]) -> pl.Series | list[list[str]]:
    joined = [_JOIN.join(seq) for seq in seqs]
    if (sum(text.count(_JOIN) for text in joined) != sum(max(len(seq) - 1, 0) for seq in seqs)
            or any(not text and len(seq) for text, seq in zip(joined, seqs))):
        return [list(seq) for seq in seqs]  # a token holds the separator, or is empty
    text = pl.Series(joined, dtype=pl.String)
    return pl.select(pl.when(text.str.len_bytes() == 0)
                     .then(pl.lit([], dtype=pl.List(pl.String)))
                     .otherwise(text.str.split(_JOIN))).to_series()


def make_table(
    xs: Sequence[Sequence[str]], ys: Sequence[Sequence[str]], split: str | Sequence[str]
) -> pl.DataFrame:
    splits = [split] * len(xs) if isinstance(split, str) else list(split)
    return pl.DataFrame({"x": token_lists(xs), "y": token_lists(ys), "split": splits},
                        schema=SCHEMA)


def select_split(table: pl.DataFrame, split: str) -> pl.DataFrame:
    names = table["split"].unique(maintain_order=True).to_list()
    if split not in names:
        raise UserError(f"no split '{split}' in the data (have: {', '.join(names)})")
    return table.filter(pl.col("split") == split)


def pairs(table: pl.DataFrame) -> list[tuple[list[str], list[str]]]:
    return list(zip(table["x"].to_list(), table["y"].to_list()))
