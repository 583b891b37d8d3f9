"""Data sets as Polars example tables (see ``table.py``), addressed by name or path.

Names: ``scan/<split>`` (simple, length, jump, turn_left, around_right, right,
opposite_right, jump_around_right), ``sigmorphon/<lang>`` (the shared-task files),
``sigmorphon/<lang>/hints-<h>.<i>`` (the R&R few-shot split), ``lm/<lang>`` (kin, lao,
na, tok) and ``cogs``. Anything else is read as a file path.
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from compgen.data import cogs, lm, scan, sigmorphon
from compgen.data.sources import resolve_data_dir
from compgen.data.table import make_table, pairs, select_split
from compgen.data.vocab import Vocab
from compgen.errors import UserError, read_text

__all__ = [
    "Vocab",
    "dataset_names",
    "load_dataset",
    "make_table",
    "pairs",
    "read_data_file",
    "select_split",
]


def sigmorphon_languages(data_dir=None) -> list[str]:
    """The languages with a SIGMORPHON 2018 training file in the data folder (the paper's
    three first), or the paper's when the folder has none."""
    from compgen.data.sources import resolve_data_dir

    folder = resolve_data_dir(data_dir) / "sigmorphon2018"
    present = {p.name.split("-train-", 1)[0] for p in folder.glob("*-train-*")} if folder.is_dir() else set()
    paper = list(sigmorphon.PAPER_LANGUAGES)
    return paper + sorted(present - set(paper))


def dataset_names(data_dir=None) -> list[str]:
    names = [f"scan/{s}" for s in scan.SPLITS]
    names += [f"sigmorphon/{lang}" for lang in sigmorphon_languages(data_dir)]
    names += [f"sigmorphon/{lang}/hints-<4|8|16>.<0-4>" for lang in sigmorphon.PAPER_LANGUAGES]
    names += [f"lm/{lang}" for lang in lm.LANGUAGES]
    names += ["cogs"]
    return names


def read_data_file(path: Path) -> pl.DataFrame:
    """Read one data file, recognising its format by its content: SCAN lines, COGS
    (3 tab fields, .tsv), SIGMORPHON (3 tab fields), samples TSV (2 tab fields) or a plain
    corpus (one sentence per line)."""
    if not path.is_file():
        raise UserError(f"{path}: no such file (and not a data set name; see 'compgen data list')")
    text = read_text(path)
    first = next((line for line in text.splitlines() if line.strip() and not line.startswith("#")),
                 None)
    if first is None:
        raise UserError(f"{path}: empty file")
    if first.startswith("IN: "):
        return make_table(*scan.parse_scan(text, str(path)), "train")
    fields = first.split("\t")
    samples_header = any(line.startswith("#x\t") for line in text.splitlines()[:5])
    if samples_header or len(fields) == 2 or (len(fields) >= 3 and _is_number(fields[2])):
        from compgen.io import parse_samples_tsv

        rows = parse_samples_tsv(text, str(path))
        return make_table([x for x, _ in rows], [y for _, y in rows], "train")
    if len(fields) == 3 and path.suffix == ".tsv":
        xs, ys, types = cogs.parse_cogs(text, str(path))
        return make_table(xs, ys, "train").with_columns(pl.Series("type", types))
    if len(fields) == 3:
        return sigmorphon.make_morph_table(sigmorphon.parse_sigmorphon(text, str(path)), "train")
    if len(fields) > 3:
        raise UserError(f"{path}: {len(fields)} tab-separated fields on the first line: not SCAN, "
                        "COGS, SIGMORPHON, a samples TSV or a corpus")
    for lineno, line in enumerate(text.splitlines(), 1):
        if "\t" in line:
            raise UserError(f"{path}:{lineno}: a tab in a plain corpus (the first line has none)")
    ys = lm.parse_corpus(text, str(path))
    return make_table([[] for _ in ys], ys, "train")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def load_dataset(name: str, data_dir: str | os.PathLike | None = None) -> pl.DataFrame:
    """Load a named data set (see module doc) or a data file path as an example table."""
    head, _, rest = name.partition("/")
    known = {"scan", "sigmorphon", "lm", "cogs"}
    if head not in known or (head != "cogs" and not rest):
        path = Path(name)
        if path.exists() or "/" in name or "." in name:
            return read_data_file(path)
        raise UserError(f"unknown data set '{name}' (valid: {', '.join(dataset_names())})")
    root = resolve_data_dir(data_dir)
    if head == "scan":
        return scan.load_scan(rest, root)
    if head == "lm":
        return lm.load_lm(rest, root)
    if head == "cogs":
        if rest:
            raise UserError(f"unknown data set '{name}' (COGS is just 'cogs')")
        return cogs.load_cogs(root)
    lang, _, fewshot = rest.partition("/")
    if not fewshot:
        return sigmorphon.load_sigmorphon(lang, root)
    return sigmorphon.load_fewshot(lang, fewshot, root)
