"""SIGMORPHON 2018 task 1: ``lemma<TAB>form<TAB>TAG;TAG;...`` lines.

Plain loading of the shared-task files (``<lang>-train-{low,medium,high}``, ``-dev``,
``-test``). Tokens are characters (spaces included); tags are single tokens.
Two token orders: *reinflection* (x = lemma chars + tags, y = form chars; generators)
and *analysis* (x = form chars, y = lemma chars + tags; the conditional model).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from compgen.errors import UserError, where

PLAIN_SPLITS = ("train-low", "train-medium", "train-high", "dev", "test")
PAPER_LANGUAGES = ("spanish", "swahili", "turkish")

SCHEMA = {"x": pl.List(pl.String), "y": pl.List(pl.String), "split": pl.String,
          "lemma": pl.String, "form": pl.String, "tags": pl.List(pl.String)}


def parse_sigmorphon(text: str, source: str = "<sigmorphon>") -> list[tuple[str, str, list[str]]]:
    """Parse task-1 lines into (lemma, form, tags) triples."""
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise UserError(
                f"{where(source, lineno)}: expected 'lemma<TAB>form<TAB>TAGS', "
                f"found {len(fields)} field(s)"
            )
        lemma, form, tags = fields
        tag_list = tags.strip().split(";")
        if not lemma or not form or not all(tag_list):
            raise UserError(f"{where(source, lineno)}: empty lemma, form or tag")
        rows.append((lemma, form, tag_list))
    if not rows:
        raise UserError(f"{source}: no SIGMORPHON examples in file")
    return rows


def make_morph_table(rows, split, order: str = "reinflection") -> pl.DataFrame:
    """Rows of (lemma, form, tags) -> example table in the given token order."""
    if order not in ("reinflection", "analysis"):
        raise UserError(f"unknown token order '{order}' (valid: reinflection, analysis)")
    splits = [split] * len(rows) if isinstance(split, str) else list(split)
    xs, ys = [], []
    for lemma, form, tags in rows:
        source = list(lemma) + list(tags)
        if order == "reinflection":
            xs.append(source)
            ys.append(list(form))
        else:
            xs.append(list(form))
            ys.append(source)
    return pl.DataFrame(
        {"x": xs, "y": ys, "split": splits, "lemma": [r[0] for r in rows],
         "form": [r[1] for r in rows], "tags": [list(r[2]) for r in rows]},
        schema=SCHEMA,
    )


def read_sigmorphon_file(path: str | Path, split: str = "train",
                         order: str = "reinflection") -> pl.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    return make_morph_table(parse_sigmorphon(path.read_text(encoding="utf-8"), str(path)),
                            split, order)


def available_languages(data_dir: Path) -> list[str]:
    folder = data_dir / "sigmorphon2018"
    if not folder.is_dir():
        return []
    return sorted({p.name.rsplit("-train-high", 1)[0] for p in folder.glob("*-train-high")})


def load_sigmorphon(lang: str, data_dir: Path, order: str = "reinflection") -> pl.DataFrame:
    """Every shared-task file of ``lang``; the ``split`` column names the file."""
    folder = data_dir / "sigmorphon2018"
    if not (folder / f"{lang}-train-high").is_file():
        langs = available_languages(data_dir)
        raise UserError(
            f"unknown SIGMORPHON language '{lang}' in {folder} "
            f"(valid: {', '.join(langs) if langs else 'none; run compgen data fetch sigmorphon'})"
        )
    parts = []
    for split in PLAIN_SPLITS:
        path = folder / f"{lang}-{split}"
        if path.is_file():
            parts.append(read_sigmorphon_file(path, split, order))
    return pl.concat(parts)
