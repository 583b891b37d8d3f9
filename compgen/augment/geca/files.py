"""GECA on named data sets and files: the training examples in, a samples TSV out."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import polars as pl

from compgen.augment.geca.config import GecaConfig
from compgen.augment.geca.partitions import Execution, check_execution
from compgen.augment.geca.synthesis import GecaResult, geca_augment
from compgen.data import refuse_overwriting_data, select_split
from compgen.data.dataset import Dataset, open_dataset
from compgen.errors import UserError
from compgen.io import SAMPLES_HEADER, SPACE_TOKEN, atomic_open, has_inputs, refuse_unwritable


def load_training(data: Dataset | str, data_dir=None) -> pl.DataFrame:
    """The train split of a data set (a Dataset, or a name, file or folder read here), or
    every example of a data file."""
    dataset = open_dataset(data, data_dir)
    table = dataset.table
    if "split" in table.columns and table.height:
        table = select_split(table, "train")
    if table.height == 0:
        raise UserError(f"{dataset.name}: no training examples")
    return table


def augment_file(data: Dataset | str, output, config: GecaConfig, concat: bool = False,
                 data_dir=None, progress=None, execution: Execution | None = None) -> GecaResult:
    """Run GECA on the train split of ``data`` (a Dataset, or a name, file or folder read
    here) and write the synthesized examples (after the training examples with
    ``concat``) as a samples TSV, atomically. Spilled partitions go to a temporary folder
    beside the output unless ``execution`` names one."""
    config.validate()
    refuse_overwriting_data(output, data.name if isinstance(data, Dataset) else data, data_dir)
    execution = execution or Execution()
    check_execution(execution)
    if execution.spill_dir is None:
        execution = replace(execution, spill_dir=Path(output).resolve().parent)
    result = geca_augment(load_training(data, data_dir), config, progress=progress,
                          execution=execution)
    tables = [result.train, result.table] if concat else [result.table]
    result.stats["rows_written"] = write_tables_tsv(output, tables)
    return result


def _field(column: str) -> pl.Expr:
    """A token list as a samples-TSV field (``io.write_samples_tsv``'s: tokens joined by
    spaces, a space token written as U+2581)."""
    return (pl.col(column).list.eval(pl.when(pl.element() == " ").then(pl.lit(SPACE_TOKEN))
                                     .otherwise(pl.element())).list.join(" "))


def write_tables_tsv(output, tables: list[pl.DataFrame], chunk: int = 100_000) -> int:
    """The x, y columns of ``tables`` as ``x<TAB>y`` lines (what ``write_samples_tsv``
    writes for those rows, header included), atomically, a chunk of rows at a time: a
    million synthesized examples as Python lists of strings would take gigabytes."""
    first_row = 0
    for table in tables:
        refuse_unwritable(table, output, first_row=first_row)
        first_row += table.height
    n = 0
    with atomic_open(output, "w", encoding="utf-8") as out:
        if any(has_inputs(table) for table in tables):
            out.write(SAMPLES_HEADER + "\n")
        for table in tables:
            for begin in range(0, table.height, chunk):
                lines = table.slice(begin, chunk).select(
                    pl.concat_str([_field("x"), _field("y")], separator="\t"))
                out.write("\n".join(lines.to_series().to_list()) + "\n")
                n += lines.height
    return n
