"""`compgen evaluate`: predictors (exact match / F1), generators (direct inference, plots)."""

from __future__ import annotations

from pathlib import Path

import torch
import typer

from compgen.cli.common import (
    Columns,
    DataDir,
    DeviceOption,
    XField,
    YField,
    checkpoint_kind,
    console,
    err_console,
    fields_of,
)
from compgen.data.dataset import open_dataset
from compgen.device import resolve_device
from compgen.errors import UserError
from compgen.evaluation.direct_inference import evaluate_direct
from compgen.evaluation.evaluate import (
    aggregate,
    evaluate_predictor,
    markdown_table,
    write_generator_plots,
    write_plots,
    write_results,
)

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("evaluate")
def evaluate_cmd(
    models: list[Path] = typer.Argument(..., help="predictor or generator checkpoint(s), or predictor export folders (compgen export); several = seeds, reported as mean ± std"),
    data: str | None = typer.Option(None, "--data", help="data set (default: the one the model was trained on)"),
    output: Path | None = typer.Option(None, "-o", "--output", help="results CSV (also writes <stem>.summary.csv and <stem>.md); default: print only"),
    plots: Path | None = typer.Option(None, "--plots", help="folder for learning-curve and attention PNGs (generators: the attention over both prototypes, the paper's Fig. 3)"),
    direct: bool = typer.Option(False, "--direct", help="direct inference with a recomb-2 SCAN generator (paper App. E): exact match, top-3 match, F1"),
    limit: int | None = typer.Option(None, "--limit", help="--direct: only the first N unique test inputs"),
    beam: int = typer.Option(0, "--beam", help="beam width (0 = greedy, as the reference)"),
    predictions: Path | None = typer.Option(None, "--predictions", help="per-example TSV (one model only)"),
    batch_size: int = typer.Option(256, "--batch-size", help="sources decoded per batch"),
    backend: str | None = typer.Option(None, "--backend", help="export folders: onnx (default) | torchscript | torch"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    seed: int = typer.Option(0, "--seed", help="seeds the generator's test-time dropout and the random prototype fallbacks; unused by the predictor"),
    device: str | None = DeviceOption,
    data_dir: Path | None = DataDir,
    x_field: str | None = XField,
    y_field: str | None = YField,
    columns: str | None = Columns,
) -> None:
    """Exact match and morphology F1 (FUT / PST / FUT+PST / OTHER, all and NOVEL) of
    predictors; direct inference and attention figures of generators."""
    if batch_size < 1:
        raise UserError("--batch-size must be >= 1")
    dev = resolve_device(device)
    if beam < 0:
        raise UserError("--beam must be >= 0")
    if limit is not None and (limit < 1 or not direct):
        raise UserError("--limit takes N >= 1 and goes with --direct")
    if predictions and len(models) > 1:
        raise UserError("--predictions takes one model")
    if threads is not None:
        torch.set_num_threads(max(1, threads))
    torch.manual_seed(seed)
    # --data read once, with the fields named here; without it each model reads its own
    fields = fields_of(x_field, y_field, columns)
    dataset = (open_dataset(data, data_dir, fields)
               if data else None)
    rows = _evaluate_models(models, dataset, plots, direct, limit, predictions, batch_size,
                            backend, beam, seed, data_dir, dev)
    if not rows:
        return
    console.print(markdown_table(aggregate(rows)), highlight=False, markup=False)
    for row in rows:
        if row.get("n_unfinished"):
            err_console.print(f"warning: {row['model']}: {row['n_unfinished']:,} of {row['n']:,} "
                              f"predictions on {row['set']} ran to max_len without ending (cut); "
                              "train with a larger --max-len", highlight=False, markup=False)
    for row in rows:
        if "top3_match" in row:
            console.print(f"{row['model']}: top-3 match {row['top3_match']:.4f}", highlight=False)
    if output:
        paths = write_results(rows, output)
        console.print(f"wrote {paths['csv']}, {paths['summary']}, {paths['markdown']} (predictors on "
                      f"{dev})", highlight=False)


def _evaluate_models(models, data, plots, direct, limit, predictions, batch_size, backend,
                     beam, seed, data_dir, dev) -> list[dict]:
    """``data``: the Dataset of --data, or None (each model's own)."""
    rows = []
    for model in models:
        if model.is_dir():   # a predictor export folder
            if direct:
                raise UserError(f"{model}: --direct needs a generator checkpoint (compgen train generator)")
            rows += evaluate_predictor(model, data, data_dir, beam, batch_size, predictions, backend,
                                       dev)
            continue
        if checkpoint_kind(model) == "recombine":
            rows += _evaluate_generator(model, data, plots, direct, limit, predictions,
                                        batch_size, seed, data_dir)
            continue
        if direct:
            raise UserError(f"{model}: --direct needs a generator checkpoint (compgen train generator)")
        rows += evaluate_predictor(model, data, data_dir, beam, batch_size, predictions, backend,
                                   dev)
        if plots:
            for path in write_plots(model, plots, data, data_dir):
                console.print(f"plot {path}", highlight=False)
    return rows



def _evaluate_generator(model: Path, data, plots: Path | None, direct: bool,
                        limit: int | None, predictions: Path | None, batch_size: int,
                        seed: int, data_dir: Path | None) -> list[dict]:
    """A generator checkpoint: its figures (--plots) and direct-inference row (--direct)."""
    if not (direct or plots):
        raise UserError(f"{model}: a generator checkpoint; evaluate it with --direct "
                        "(direct inference) and/or --plots DIR (attention figure)")
    if plots:
        for path in write_generator_plots(model, plots, data_dir, seed=seed):
            console.print(f"plot {path}", highlight=False)
    if not direct:
        return []
    return evaluate_direct(model, data, data_dir, limit, batch_size, seed, predictions,
                           log=lambda line: err_console.print(line, highlight=False, markup=False))
