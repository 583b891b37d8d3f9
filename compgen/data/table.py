"""The example table every component takes: a Polars DataFrame.

Columns: ``x`` and ``y`` (list[str] tokens; ``x`` is empty for language modelling),
``split`` (str). Morphology tables add ``lemma`` and ``tags``.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from compgen.errors import UserError
from compgen.io import remove_stale_staging, staging_prefix

SCHEMA = {"x": pl.List(pl.String), "y": pl.List(pl.String), "split": pl.String}
# the splits a saved table keeps (files.py reads a folder of these)
SPLIT_NAMES = ("train", "dev", "test")


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


def table_digest(table: pl.DataFrame) -> str:
    """sha256 of a table's rows (x, y) split by split, in name order: the same for a table
    and its saved folder, however the files store them."""
    digest = hashlib.sha256()
    for split in sorted(table["split"].unique().to_list()):
        digest.update(split.encode() + b"\x1e")
        for x, y in table.filter(pl.col("split") == split).select("x", "y").iter_rows():
            digest.update(f"{_JOIN.join(x)}\x1e{_JOIN.join(y)}\x1d".encode())
    return digest.hexdigest()


def _saved_table(folder: Path) -> pl.DataFrame:
    """A folder ``save_table_folder`` wrote, read back; anything else is a UserError (it
    is not replaced)."""
    files = sorted(folder.iterdir())
    if not files or any(f.suffix != ".parquet" or f.stem not in SPLIT_NAMES for f in files):
        raise UserError(f"{folder}: exists and holds other files than a saved training table "
                        f"({', '.join(f.name for f in files[:5]) or 'nothing'}); move it away")
    try:
        return pl.concat([pl.read_parquet(f).select("x", "y").with_columns(split=pl.lit(f.stem))
                          for f in files]).cast(SCHEMA)
    except (pl.exceptions.PolarsError, OSError):
        raise UserError(f"{folder}: a damaged saved training table; move it away") from None


def save_table_folder(table: pl.DataFrame, folder: str | os.PathLike) -> Path:
    """Write ``table`` as a data folder (``SPLIT.parquet``, columns x and y as token lists),
    which reads back as the same table. A folder holding the same rows is kept as it is;
    one holding other rows is replaced whole, never left half-written."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise UserError(f"{folder}: exists and is not a folder (the training table goes there)")
    if folder.is_dir() and table_digest(_saved_table(folder)) == table_digest(table):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(folder)
    staged = Path(tempfile.mkdtemp(prefix=staging_prefix(folder), dir=folder.parent))
    old = None
    try:
        for split in table["split"].unique(maintain_order=True).to_list():
            if split not in SPLIT_NAMES:
                raise UserError(f"split '{split}': a saved training table keeps the splits "
                                f"{', '.join(SPLIT_NAMES)}")
            table.filter(pl.col("split") == split).select("x", "y") \
                .write_parquet(staged / f"{split}.parquet")
        if folder.exists():
            old = Path(tempfile.mkdtemp(prefix=staging_prefix(folder), dir=folder.parent))
            os.replace(folder, old / folder.name)
        os.replace(staged, folder)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    return folder
