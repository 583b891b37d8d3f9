"""LM corpora from example pairs: one side (y, x, or x <sep> y) of a data set's training
split or of a samples TSV, optionally with GECA's synthesized examples appended, so that
``compgen lm train`` fits a model on, e.g., the training targets in one command."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from compgen.augment.geca import geca_augment, load_training, make_config
from compgen.data import refuse_overwriting_data
from compgen.data.dataset import Dataset, open_dataset
from compgen.errors import SettingError, UserError
from compgen.io import atomic_open
from compgen.lm.kenlm_tools import find_kenlm_binaries, train_lm
from compgen.lm.scorer import SIDES, side_text


def training_pairs(data: Dataset | str, data_dir=None) -> list[tuple[list[str], list[str]]]:
    """(x, y) pairs: the train split of a named data set, every row of a data file, or
    the rows of a samples TSV."""
    table = load_training(data, data_dir)
    return list(zip(table["x"].to_list(), table["y"].to_list()))


def write_side_corpus(data: Dataset | str, side: str, path: str | os.PathLike,
                      geca: str | None = None, seed: int = 0, data_dir=None) -> dict:
    """Write one sentence per pair (``side``) of ``data``'s training pairs (a Dataset, or
    a name or file read here) to ``path``; with ``geca`` (a GECA preset), GECA's
    synthesized pairs follow the original ones. Returns counts for the log."""
    if side not in SIDES:
        raise SettingError(f"`side` {side}: unknown (valid: {', '.join(SIDES)})")
    dataset = open_dataset(data, data_dir)
    data = dataset.name
    train = load_training(dataset)
    pairs = list(zip(train["x"].to_list(), train["y"].to_list()))
    synthetic: list = []
    if geca:
        config = make_config(geca, {"seed": seed}, data=data)
        config.validate()
        result = geca_augment(train, config)
        synthetic = list(zip(result.table["x"].to_list(), result.table["y"].to_list()))
    lines = [side_text(x, y, side) for x, y in pairs + synthetic]
    if not any(line.strip() for line in lines):
        raise UserError(f"{data}: the {side} side is empty in every example")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "w", encoding="utf-8") as out:
        out.writelines(line + "\n" for line in lines if line.strip())
    return {"original": len(pairs), "synthetic": len(synthetic)}


def train_side_lm(data: Dataset | str, side: str, output: str | os.PathLike, order: int = 5,
                  discount_fallback: bool = False, memory: str = "500M",
                  geca: str | None = None, seed: int = 0, data_dir=None) -> dict:
    """``train_lm`` on one side of ``data``'s training pairs (``write_side_corpus``): what
    ``compgen lm train DATA --side SIDE`` and ``compgen.kenlm_train(..., side=)`` run.
    Returns the counts of ``write_side_corpus``."""
    name = data.name if isinstance(data, Dataset) else data
    refuse_overwriting_data(output, name, data_dir)
    find_kenlm_binaries()  # fail before GECA runs
    with tempfile.TemporaryDirectory(prefix="compgen-lm-side-") as tmp:
        text = Path(tmp) / "corpus.txt"
        counts = write_side_corpus(data, side, text, geca, seed, data_dir)
        try:
            train_lm(text, output, order, discount_fallback, memory, data_dir)
        except UserError as exc:   # name the data, not the temporary corpus
            raise UserError(str(exc).replace(str(text), f"{name} (side {side})")) from None
    return counts
