"""Per-split counts, vocabulary sizes and length statistics of an example table."""

from __future__ import annotations

import polars as pl


def table_stats(table: pl.DataFrame) -> pl.DataFrame:
    """One row per split: examples, distinct examples, x/y vocabulary and length stats.
    A table without an input side (language-modelling corpora) has no x columns."""
    stats = (
        table.lazy()
        .with_columns(x_len=pl.col("x").list.len(), y_len=pl.col("y").list.len(),
                      x_key=pl.col("x").list.join(" "), y_key=pl.col("y").list.join(" "))
        .group_by("split", maintain_order=True)
        .agg(
            examples=pl.len(),
            distinct=pl.struct("x_key", "y_key").n_unique(),
            x_vocab=pl.col("x").list.explode(keep_nulls=False, empty_as_null=False).n_unique(),
            y_vocab=pl.col("y").list.explode(keep_nulls=False, empty_as_null=False).n_unique(),
            x_len_mean=pl.col("x_len").mean(),
            x_len_max=pl.col("x_len").max(),
            y_len_mean=pl.col("y_len").mean(),
            y_len_max=pl.col("y_len").max(),
        )
        .collect()
    )
    if table.height and table.select(pl.col("x").list.len().max()).item() == 0:
        stats = stats.drop("x_vocab", "x_len_mean", "x_len_max")
    return stats
