"""GECA on named data sets and files: the training examples in, a samples TSV out."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl

from compgen.augment.geca.config import GecaConfig
from compgen.augment.geca.partitions import Execution, check_execution
from compgen.augment.geca.synthesis import GecaResult, geca_augment
from compgen.data import load_dataset, select_split
from compgen.errors import UserError
from compgen.io import write_samples_tsv


def load_training(data: str, data_dir=None) -> pl.DataFrame:
    """The train split of a named data set, or every example of a data file."""
    table = load_dataset(data, data_dir)
    if "split" in table.columns and table.height:
        table = select_split(table, "train")
    if table.height == 0:
        raise UserError(f"{data}: no training examples")
    return table


def augment_file(data: str, output, config: GecaConfig, concat: bool = False, data_dir=None,
                 progress=None, execution: Execution | None = None) -> GecaResult:
    """Run GECA on the train split of ``data`` and write the synthesized examples (after
    the training examples with ``concat``) as a samples TSV, atomically. Spilled
    partitions go to a temporary folder beside the output unless ``execution`` names one."""
    config.validate()
    execution = execution or Execution()
    check_execution(execution)
    if execution.spill_dir is None:
        execution = replace(execution, spill_dir=Path(output).resolve().parent)
    result = geca_augment(load_training(data, data_dir), config, progress=progress,
                          execution=execution)
    rows = list(zip(result.table["x"].to_list(), result.table["y"].to_list()))
    if concat:
        rows = list(zip(result.train["x"].to_list(), result.train["y"].to_list())) + rows
    result.stats["rows_written"] = write_samples_tsv(output, rows)
    return result
