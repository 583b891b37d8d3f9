"""COGS (Kim & Linzen 2020): ``sentence<TAB>logical form<TAB>type`` lines."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from compgen.data.sources import named_data_text
from compgen.errors import SettingError, UserError, not_a_file, read_text, where

SPLITS = ("train", "dev", "test")


def parse_cogs(text: str, source: str = "<cogs>", join_variables: bool = True):
    """Parse COGS lines into (sentences, logical forms, types).

    ``join_variables`` writes ``x _ 1`` as the single token ``x_1``, as the GECA
    reference's COGS loader does (shorter sequences, one token per variable).
    """
    xs, ys, types = [], [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.rstrip("\n").split("\t")
        if len(fields) != 3:
            raise UserError(
                f"{where(source, lineno)}: expected 3 tab-separated fields "
                f"(sentence, logical form, type), found {len(fields)}"
            )
        sentence, form, kind = fields
        if join_variables:
            form = form.replace(" _ ", "_")
        x, y = sentence.split(), form.split()
        if not x or not y or not kind.strip():
            raise UserError(f"{where(source, lineno)}: empty sentence, logical form or type")
        xs.append(x)
        ys.append(y)
        types.append(kind.strip())
    if not xs:
        raise UserError(f"{source}: no COGS examples in file")
    return xs, ys, types


def read_cogs_file(path: str | Path, split: str = "train", data_dir: Path | None = None) -> pl.DataFrame:
    """A COGS file; with ``data_dir``, the named set's file there, checked against its sum."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: {not_a_file(path)}")
    text = read_text(path) if data_dir is None else named_data_text(path, data_dir)
    xs, ys, types = parse_cogs(text, str(path))
    return pl.DataFrame(
        {"x": xs, "y": ys, "split": [split] * len(xs), "type": types},
        schema={"x": pl.List(pl.String), "y": pl.List(pl.String), "split": pl.String,
                "type": pl.String},
    )


def load_cogs(data_dir: Path) -> pl.DataFrame:
    parts = []
    for split in SPLITS:
        path = data_dir / "cogs" / f"{split}.tsv"
        if not path.is_file():
            raise SettingError(f"{path}: missing; run 'compgen data fetch cogs' or set `data_dir`")
        parts.append(read_cogs_file(path, split, data_dir))
    return pl.concat(parts)
