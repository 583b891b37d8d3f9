"""`compgen evaluate-grammar`: coverage of a QCFG grammar file and CSL-as-parser accuracy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import typer

from compgen.cli.common import Columns, DataDir, XField, YField, console, fields_of
from compgen.errors import UserError

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("evaluate-grammar")
def evaluate_grammar_cmd(
    grammar: Path = typer.Argument(..., help="grammar file (source ### target, one rule a line)"),
    data: str = typer.Option(..., "--data", help="data set (scan/length, ...) or folder of train/test files: train fits the parser, test is scored"),
    config: str = typer.Option("scan", "--config", help="model settings: scan"),
    steps: int | None = typer.Option(None, "--steps", help="training steps of the parser model (default: the config's)"),
    seed: int = typer.Option(0, "--seed", help="random seed of the model fit (the same seed gives the same figures)"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    data_dir: Path | None = DataDir,
    x_field: str | None = XField,
    y_field: str | None = YField,
    columns: str | None = Columns,
) -> None:
    """Share of train and test pairs the grammar derives, and exact match of the Viterbi
    parse under the latent-state model fitted on train."""
    # start-up: `compgen --help` loads no torch, polars or CSL report code
    from compgen.augment.csl.presets import preset
    from compgen.augment.csl.rules import read_grammar
    from compgen.augment.csl.run import evaluate_grammar
    from compgen.cli.csl_report import csl_progress, print_csl_summary
    from compgen.data import split_of
    from compgen.data.dataset import open_dataset
    from compgen.data.table import pairs as table_pairs

    if steps is not None and steps < 1:
        raise UserError(f"--steps must be >= 1 (got {steps})")
    if threads is not None:
        if threads < 1:
            raise UserError("--threads must be >= 1")
        # start-up: `compgen --help` loads no torch
        import torch

        torch.set_num_threads(threads)
    cfg = preset(config)
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(
        cfg.model, seed=seed, training_steps=steps or cfg.model.training_steps))
    rules = read_grammar(grammar)
    fields = fields_of(x_field, y_field, columns)
    table = open_dataset(data, data_dir, fields).table
    train = table_pairs(split_of(table, "train", data))
    test = table_pairs(split_of(table, "test", data))
    with csl_progress() as progress:
        summary, phases = evaluate_grammar(rules, train, test, cfg.model, progress)
    print_csl_summary(console, f"grammar {grammar.name} on {data}", summary, phases)
