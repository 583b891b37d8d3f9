"""Data sets as Polars example tables (see ``table.py``), addressed by name or path.

Names: ``scan/<split>`` (simple, length, jump, turn_left, around_right, right,
opposite_right, jump_around_right), ``sigmorphon/<lang>`` (the shared-task files),
``sigmorphon/<lang>/hints-<h>.<i>`` (the R&R few-shot split), ``lm/<lang>`` (kin, lao,
na, tok), ``cogs`` and ``geoquery/<sql|logic>-<query|question>``. Anything else is a file or folder of the user's (``files.py``:
TSV, JSONL, CSV, Parquet, Arrow, a folder of train/dev/test files).
"""

from __future__ import annotations

import os
from pathlib import Path

import polars as pl

from compgen.data import cogs, geoquery, lm, scan, sigmorphon
from compgen.data.files import Fields, read_data_file, read_data_path
from compgen.data.sources import resolve_data_dir
from compgen.data.table import make_table, pairs, select_split
from compgen.data.task import Task, task_of
from compgen.data.vocab import Vocab
from compgen.errors import UserError
from compgen.io import refuse_overwriting_inputs

__all__ = [
    "Fields",
    "Task",
    "Vocab",
    "dataset_names",
    "is_named_dataset",
    "keeps_own_dev",
    "load_dataset",
    "make_table",
    "pairs",
    "read_data_file",
    "read_data_path",
    "select_split",
    "split_of",
    "task_of",
]


def sigmorphon_languages(data_dir=None) -> list[str]:
    """The languages with a SIGMORPHON 2018 training file in the data folder (the paper's
    three first), or the paper's when the folder has none."""
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
    names += [f"geoquery/{name}" for name in geoquery.NAMES]
    return names


def split_of(table: pl.DataFrame, split: str, data: str) -> pl.DataFrame:
    """The rows of ``split``; a data file without it is told to come as a folder."""
    names = table["split"].unique(maintain_order=True).to_list()
    if split not in names and Path(data).is_file():
        raise UserError(f"{data}: one data file, whose rows are the {'/'.join(names)} split; "
                        f"this needs a {split} split too: give a folder holding train and "
                        "test files (train.tsv, test.tsv, ...) or a file with a split field")
    return select_split(table, split)


def is_named_dataset(name: str) -> bool:
    """Whether ``name`` addresses a named set (``scan/jump``, ``cogs``) and not a path."""
    return task_of(name).named


def keeps_own_dev(name: str) -> bool:
    return task_of(name).keeps_own_dev


def refuse_overwriting_data(output, data, data_dir=None, label: str = "data",
                            option: str = "`output`") -> None:
    """``refuse_overwriting_inputs`` for a command reading ``data``: a data file, folder or
    export folder is an input; a named set's data folder is kept whole."""
    if is_named_dataset(str(data)):
        try:
            root = resolve_data_dir(data_dir)
        except UserError:
            return   # no data folder: nothing there to overwrite (loading the data says so)
        refuse_overwriting_inputs(output, [], option, kept_folders=[root])
    else:
        refuse_overwriting_inputs(output, [(label, data)], option)


def load_dataset(name: str, data_dir: str | os.PathLike | None = None,
                 fields: Fields | None = None) -> pl.DataFrame:
    """Load a named data set (see module doc), or a data file or folder (read with
    ``fields``), as an example table."""
    task = task_of(name)
    head, rest = task.family, task.split
    if not task.named:
        path = Path(name)
        if path.exists() or "/" in name or "." in name:
            return read_data_path(path, fields)
        raise UserError(f"unknown data set '{name}' (valid: {', '.join(dataset_names())})")
    root = resolve_data_dir(data_dir)
    if head == "scan":
        return scan.load_scan(rest, root)
    if head == "lm":
        return lm.load_lm(rest, root)
    if head == "geoquery":
        return geoquery.load_geoquery(rest, root)
    if head == "cogs":
        if rest:
            raise UserError(f"unknown data set '{name}' (COGS is just 'cogs')")
        return cogs.load_cogs(root)
    lang, _, fewshot = rest.partition("/")
    if not fewshot:
        return sigmorphon.load_sigmorphon(lang, root)
    return sigmorphon.load_fewshot(lang, fewshot, root)
