"""A data set resolved once: the name a run records (a named set, or the user's file or
folder as given) and its example table, read with the fields the user named. A command
resolves its ``--data`` to one of these before any work; what trains on it takes the table
from here, so the reader's settings travel with the call and the file is read once."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import polars as pl

from compgen.data import load_dataset
from compgen.data.files import Fields
from compgen.data.task import Task, task_of


@dataclass(frozen=True)
class Dataset:
    name: str            # what checkpoints record and --resume compares
    table: pl.DataFrame  # the example table (compgen.data.table)
    fields: Fields = field(default_factory=Fields)   # how a file was read (recorded)

    @property
    def task(self) -> Task:
        return task_of(self.name)


def open_dataset(data: str | os.PathLike | Dataset, data_dir: str | os.PathLike | None = None,
                 fields: Fields | None = None) -> Dataset:
    """``data`` (a named set, a file or a folder) read as an example table, a file with
    ``fields`` (default: the usual names); a Dataset is returned as it is."""
    if isinstance(data, Dataset):
        return data
    fields = fields or Fields()
    return Dataset(str(data), load_dataset(str(data), data_dir, fields), fields)
