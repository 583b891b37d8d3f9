"""The Python API: the main steps of compgen as functions that take and return Polars
DataFrames (the example table: ``x`` and ``y`` token lists, ``split``). Each is a thin
wrapper over the library function the command line calls; torch and the heavier modules
are imported by the call that needs them, never by ``import compgen``.

    import compgen
    data = compgen.load("tests/data/numbers/jsonl")          # train/dev/test splits
    extra = compgen.geca(data)                                # x, y, split="geca"
    compgen.train_predictor(data, "p.pt", augment=extra, epochs=1)
    compgen.evaluate_model("p.pt", data)                            # exact match per set
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compgen.errors import SettingError, UserError, name_settings

if TYPE_CHECKING:
    import polars as pl

    from compgen.data.dataset import Dataset

PathLike = str | os.PathLike
# the data name a run on a DataFrame records (its checkpoint keeps the pairs themselves)
DATAFRAME = "<DataFrame>"


def load(source: PathLike | pl.DataFrame, *, x_field: str | None = None,
         y_field: str | None = None, columns: str | None = None, data_dir: PathLike | None = None,
         split: str = "train") -> pl.DataFrame:
    """A data set as the example table: a name (``scan/jump``), a file (TSV, JSONL, CSV,
    Parquet, Arrow), a folder of train/dev/test files, or a DataFrame whose columns hold
    text or token lists (input: x/input/source/src, output: y/output/target/tgt, or
    ``x_field``/``y_field``; a ``split`` column, else every row is ``split``)."""
    # start-up: `import compgen` loads no polars or numpy; the call does
    import polars as pl

    from compgen.data import load_dataset
    from compgen.data.files import Fields, parse_columns, records_table

    _check_type("split", split, str)
    if split not in SPLITS:
        raise SettingError(f"`split` {split!r}: unknown (valid: {', '.join(SPLITS)})")
    for name, value in (("x_field", x_field), ("y_field", y_field), ("columns", columns)):
        _check_type(name, value, str, none_ok=True)
    fields = Fields(x_field, y_field, parse_columns(columns))
    if isinstance(source, pl.DataFrame):
        if _is_example_table(source):
            return source   # already an example table (what the other functions return)
        return records_table(source, "<DataFrame>", fields, split, first_line=None)
    return load_dataset(str(source), data_dir, fields)


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's CPU threads set to ``threads`` for the block (None: left as they are)."""
    if threads is None:
        yield
        return
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise UserError(f"threads must be a whole number >= 1, not {threads!r}")
    import torch  # start-up: `import compgen` loads no torch; the call does

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


SPLITS = ("train", "dev", "test")


def _check_type(name: str, value, kind, none_ok: bool = False) -> None:
    """A wrong type is a SettingError naming the argument (not a traceback, nor a value
    silently rounded or read as true)."""
    if value is None and none_ok:
        return
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise SettingError(f"`{name}` {value!r}: must be an integer")
    if kind is not int and not isinstance(value, kind):
        raise SettingError(f"`{name}` {value!r}: must be {kind.__name__}")


def _is_example_table(table) -> bool:
    """The example table's own schema: x and y token lists, a text split (a table that
    only looks like one, say with number tokens or a number split, is read as records)."""
    # start-up: `import compgen` loads no polars; the call does
    import polars as pl

    tokens = pl.List(pl.String)
    schema = table.schema
    return (schema.get("x") == tokens and schema.get("y") == tokens
            and schema.get("split") == pl.String)


def _train_split(data: PathLike | pl.DataFrame) -> pl.DataFrame:
    # start-up: `import compgen` loads no polars or numpy; the call does
    from compgen.data import select_split

    table = load(data)
    return select_split(table, "train") if "train" in table["split"].to_list() else table


def _pairs(table: pl.DataFrame) -> list[tuple[list[str], list[str]]]:
    return list(zip(table["x"].to_list(), table["y"].to_list()))


def _warn(reasons: list[str]) -> None:
    """An augmenter's reasons why its output cannot help, as warnings at the caller's line
    (settings named as the keyword arguments that set them)."""
    for reason in reasons:
        warnings.warn(name_settings(reason, lambda name: name), UserWarning, stacklevel=3)


def geca(data: PathLike | pl.DataFrame, preset: str | None = "generic", **options: Any) -> pl.DataFrame:
    """GECA on the train split: the synthesized rows (``split`` = ``geca``). ``preset`` is
    a GECA preset (``compgen presets``); ``options`` override its values (``n_sample``,
    ``wug_size``, ``seed``, ...). No row synthesized is a UserWarning saying why."""
    # start-up: `import compgen` loads no polars or numpy; the call does
    from compgen.augment.geca import geca_augment, make_config

    config = make_config(preset, options)
    config.validate()
    result = geca_augment(_train_split(data), config)
    _warn(result.warnings)
    return result.table


def csl(data: PathLike | pl.DataFrame, n: int = 1000, *, config: str = "generic", seed: int = 0,
        dedup: bool = True, steps: int | None = None) -> pl.DataFrame:
    """CSL: induce a QCFG from the train split, fit its model, sample ``n`` pairs
    (``dedup``: distinct and not training pairs). ``split`` = ``csl``. A grammar that
    derives none of the dev/test pairs, or samples that all have a training output, is a
    UserWarning saying so."""
    # start-up: `import compgen` loads no torch, polars, numpy or dataclasses; the call does
    import dataclasses

    from compgen.augment.csl.presets import preset
    from compgen.augment.csl.run import csl_augment
    from compgen.data.table import make_table

    _check_type("n", n, int)
    if n < 1:
        raise SettingError(f"`n` {n}: must be >= 1")

    cfg = preset(config)
    cfg = dataclasses.replace(
        cfg, model=dataclasses.replace(cfg.model, seed=seed,
                                       training_steps=steps or cfg.model.training_steps),
        sampler=dataclasses.replace(cfg.sampler, seed=seed))
    table = load(data)
    held_out = {split: _pairs(table.filter(table["split"] == split)) for split in ("dev", "test")}
    result = csl_augment(_pairs(_train_split(table)), cfg, n, dedup=dedup, **held_out)
    _warn(result.warnings)
    return make_table([x for x, _ in result.samples], [y for _, y in result.samples], "csl")


def stem_corrupt(data: PathLike | pl.DataFrame, pool: int | None = None, *,
                 seed: int | None = None, iterations: int | None = None,
                 compat: bool | None = None, config: PathLike | None = None,
                 data_dir: PathLike | None = None) -> pl.DataFrame:
    """STEM-CORRUPT (``compgen augment stem-corrupt``): ``pool`` synthetic inflection
    triples from gold ones. ``data``: a table with ``lemma``, ``form`` and ``tags`` columns
    (tags as ``V;PST`` text or a list), a ``lemma<TAB>form<TAB>tags`` file or a SIGMORPHON
    language (its train-low file). ``config``: a STEM-CORRUPT preset file read over the
    bundled one; a setting left None is the preset's (``compgen presets stem_corrupt``).
    Returns ``lemma``, ``form``, ``tags`` (text)."""
    # start-up: `import compgen` loads no polars or numpy; the call does
    import polars as pl

    from compgen.augment.stem_corrupt import stem_corrupt_pool
    from compgen.augment.stem_corrupt.corrupt import read_triples, training_file
    from compgen.training.stem_corrupt_preset import corrupt_config, stem_corrupt_preset

    settings = corrupt_config(stem_corrupt_preset(config), pool_size=pool, seed=seed,
                              iterations=iterations, compat=compat)
    if isinstance(data, pl.DataFrame):
        missing = [c for c in ("lemma", "form", "tags") if c not in data.columns]
        if missing:
            raise UserError(f"stem_corrupt: the table has no {', '.join(missing)} column "
                            f"(columns: {', '.join(data.columns)})")
        tags = pl.col("tags").list.join(";") if isinstance(data.schema["tags"], pl.List) \
            else pl.col("tags")
        rows = data.select(pl.col("lemma"), pl.col("form"), tags.alias("tags"))
        if rows.null_count().sum_horizontal().item():
            raise UserError("stem_corrupt: the lemma, form and tags columns must have no nulls")
        triples = [tuple(map(str, row)) for row in rows.iter_rows()]
    else:
        triples = read_triples(training_file(str(data), None if data_dir is None else Path(data_dir)))
    made = stem_corrupt_pool(triples, settings)
    return pl.DataFrame(made, schema=["lemma", "form", "tags"], orient="row")


@contextlib.contextmanager
def _saved_beside(data: PathLike | pl.DataFrame, output: PathLike) -> Iterator[Dataset | str]:
    """A DataFrame saved beside the checkpoint ``output`` (``OUTPUT.data/``, one Parquet
    file a split), so that the checkpoint's data reference (this folder and its sha256)
    still resolves after the call: ``compgen evaluate OUTPUT`` reads it. The run trains on
    the table itself (the folder is not read back). A folder made for a run that fails is
    removed."""
    # start-up: `import compgen` loads no polars; the call does
    import polars as pl

    from compgen.data.dataset import Dataset
    from compgen.data.table import SCHEMA, SPLIT_NAMES, save_table_folder

    if not isinstance(data, pl.DataFrame):
        yield str(data)
        return
    output = Path(output).absolute()
    folder = output.with_name(output.name + ".data")
    made = not folder.exists()
    table = load(data)
    save_table_folder(table, folder)
    # the rows as the folder reads back (x, y, split; train, dev, test): the same run as
    # training on the folder later
    table = pl.concat([table.filter(pl.col("split") == split).select(list(SCHEMA))
                       for split in SPLIT_NAMES])
    try:
        yield Dataset(str(folder), table)
    except BaseException:
        if made:
            shutil.rmtree(folder, ignore_errors=True)
        raise


def _augment_rows(rows: PathLike | pl.DataFrame | None):
    """``augment`` as the trainer takes it: a path as given, a DataFrame as its rows named by
    their digest (what the checkpoint records, and a resumed run checks)."""
    # start-up: `import compgen` loads no polars; the call does
    import polars as pl

    if rows is None or not isinstance(rows, pl.DataFrame):
        return None if rows is None else str(rows)
    # start-up: `import compgen` loads no step code; the call does
    from compgen.data.dataset import Dataset
    from compgen.training.predictor import TABLE_RECORD

    table = load(rows)
    digest = hashlib.sha256()
    for x, y in _pairs(table):
        digest.update(("\x1f".join(x) + "\t" + "\x1f".join(y) + "\n").encode())
    return Dataset(f"{TABLE_RECORD} sha256:{digest.hexdigest()[:16]}, {len(table)} rows>", table)


def train_predictor(data: PathLike | pl.DataFrame, output: PathLike, *,
                    augment: PathLike | pl.DataFrame | None = None, config: str | None = None,
                    epochs: int | None = None, p_aug: float | None = None, seed: int = 0,
                    label: str | None = None, data_dir: PathLike | None = None,
                    overrides: dict[str, Any] | None = None, threads: int | None = None,
                    log: Callable[[str], None] | None = None) -> dict:
    """Train the conditional predictor on ``data`` (+ ``augment`` rows) and write the
    checkpoint ``output``; returns the run's summary (dev exact match, epochs, ...). A
    DataFrame is saved beside the checkpoint (``OUTPUT.data/``), which records it by path
    and sha256, so that a later evaluation finds it; ``augment`` rows given as a DataFrame
    go to the trainer as they are, recorded by their digest. ``overrides`` replace preset values
    by ``section.key`` (``{"model.max_len": 120}``); ``threads``: torch CPU threads for
    this call; ``log`` receives progress and warning lines (a count of anything cut)."""
    # start-up: `import compgen` loads no torch, polars or numpy; the call does
    from compgen.errors import check_seed
    from compgen.training.numeric_options import check_numbers
    from compgen.training.predictor import train_predictor as train

    check_numbers(epochs=epochs, p_aug=p_aug)
    check_seed(seed)
    augment = _augment_rows(augment)
    with _saved_beside(data, output) as dataset, torch_threads(threads):
        return train(dataset, config, output, augment=augment, p_aug=p_aug, seed=seed,
                     data_dir=data_dir, epochs=epochs, label=label, overrides=overrides,
                     log=log or (lambda line: None))


def train_generator(data: PathLike | pl.DataFrame, output: PathLike, *, config: str | None = None,
                    max_steps: int | None = None, epochs: int | None = None,
                    overrides: dict[str, Any] | None = None,
                    data_dir: PathLike | None = None) -> Any:
    """Train an R&R generator (``compgen train generator``) on ``data`` (a name, file,
    folder or DataFrame; the checkpoint keeps the training pairs sampling needs) and write
    the checkpoint ``output``; returns the training result. ``overrides`` replace preset
    values by ``section.key`` (``{"model.hidden": 32, "train.batch_size": 32}``)."""
    # start-up: `import compgen` loads no torch, polars or numpy; the call does
    import polars as pl

    from compgen.data.dataset import Dataset, open_dataset
    from compgen.training.checkpoint import apply_overrides, default_preset, load_preset
    from compgen.training.generator import train_generator as train
    from compgen.training.numeric_options import check_numbers

    check_numbers(max_steps=max_steps, epochs=epochs)
    dataset = (Dataset(DATAFRAME, load(data)) if isinstance(data, pl.DataFrame)
               else open_dataset(data, data_dir))
    preset = load_preset(config or default_preset("generator", dataset.name))
    if preset.get("kind", "recombine") != "recombine":
        raise UserError(f"config {config}: a {preset.get('kind')} preset; a generator takes "
                        "recombine_*, proto_* or rnnlm_* presets")
    preset = apply_overrides(preset, overrides or {})
    return train(preset, dataset, output, data_dir=data_dir, max_steps=max_steps,
                 epochs=epochs, progress=False, log=lambda line: None)


def export_model(checkpoint: PathLike, output: PathLike, **options: Any) -> dict:
    """Export a generator or predictor checkpoint to a folder (TorchScript, ONNX,
    manifest); returns the manifest as written (its JSON object)."""
    # start-up: `import compgen` loads no torch, polars or numpy; the call does
    from compgen.export.kinds import export_checkpoint

    return export_checkpoint(Path(checkpoint), Path(output), **options).to_json()


def sample(source: PathLike, n: int, *, backend: str | None = None, **options: Any) -> pl.DataFrame:
    """Sample ``n`` pairs from a generator checkpoint or export folder (``backend``: onnx,
    cpp, ...); the rows as a table (``split`` = ``sample``)."""
    # start-up: `import compgen` loads no polars or numpy; the call does
    from compgen.data.table import make_table
    from compgen.decoding.options import SampleOptions
    from compgen.sampling.run import sample as run_sample
    from compgen.sampling.run import source_config

    chosen = SampleOptions(preset=source_config(source).get("sample", {}), n=n, **options)
    run = run_sample(source, chosen, backend, log=lambda line: None)
    return make_table([s.x for s in run.samples], [s.y for s in run.samples], "sample")


def evaluate_model(model: PathLike, data: PathLike | pl.DataFrame | None = None, *,
             beam: int = 0, data_dir: PathLike | None = None) -> pl.DataFrame:
    """Exact match (and F1) of a predictor checkpoint or export folder on the test split
    of ``data`` (default: the data it was trained on): one row per evaluation set."""
    # start-up: `import compgen` loads no torch, polars or numpy; the call does
    import polars as pl

    from compgen.data.dataset import Dataset
    from compgen.evaluation.evaluate import evaluate_predictor

    if isinstance(data, pl.DataFrame):   # evaluated as it is, not written to a file first
        data = Dataset(DATAFRAME, load(data))
    elif data is not None:
        data = str(data)
    return pl.DataFrame(evaluate_predictor(model, data, data_dir, beam))


def kenlm_train(corpus: PathLike, output: PathLike, order: int = 5, *, side: str | None = None,
                discount_fallback: bool = False) -> Path:
    """Estimate a modified Kneser-Ney n-gram model with lmplz (``compgen lm train``) on a
    corpus file (one sentence a line), or with ``side`` (y, x or xy) on that side of a data
    set's training pairs (a name, file or folder, as ``load`` reads it)."""
    # start-up: `import compgen` loads no polars or numpy; the call does
    from compgen.lm.kenlm_tools import train_lm
    from compgen.lm.side_corpus import train_side_lm

    _check_type("order", order, int)
    if side is not None:
        train_side_lm(str(corpus), side, output, order, discount_fallback)
        return Path(output)
    return train_lm(corpus, output, order, discount_fallback=discount_fallback)


def perplexity(model: PathLike, sentences: list[str] | pl.Series) -> float:
    """Perplexity of a KenLM model (ARPA or binary) on sentences (space-separated words)."""
    # start-up: `import compgen` loads no polars or numpy; the call does
    from compgen.lm.scorer import NgramScorer

    if isinstance(sentences, str | bytes):
        raise SettingError("`sentences`: a list of sentences, not one string (its characters "
                           "would be scored as sentences); pass [text]")
    sentences = list(sentences)
    if not sentences:
        raise SettingError("`sentences`: empty; perplexity needs at least one sentence")
    for i, sentence in enumerate(sentences):
        if not isinstance(sentence, str):
            raise SettingError(f"`sentences`[{i}] {sentence!r}: must be text (space-separated "
                               "words)")
    words = sum(len(s.split()) + 1 for s in sentences)   # + </s>
    log10 = float(NgramScorer(model).score(sentences).sum())
    return math.pow(10.0, -log10 / words)
