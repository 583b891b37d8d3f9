"""`compgen augment csl` and `compgen evaluate-grammar`: CSL's synthetic pairs from an induced
QCFG, and the coverage of a grammar file with CSL-as-parser accuracy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import torch
import typer

from compgen.augment.csl.dataset import csl_augment_dataset
from compgen.augment.csl.presets import preset
from compgen.augment.csl.rules import read_grammar
from compgen.augment.csl.run import evaluate_grammar
from compgen.cli.common import (
    Columns,
    DataDir,
    XField,
    YField,
    console,
    err_console,
    fields_of,
    log_with_flags,
)
from compgen.cli.csl_report import csl_progress, print_csl_summary
from compgen.data import split_of
from compgen.data.dataset import open_dataset
from compgen.data.table import pairs as table_pairs
from compgen.data.task import task_of
from compgen.errors import UserError

# its commands, listed in compgen.cli.commands: augment csl and evaluate-grammar
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
    if steps is not None and steps < 1:
        raise UserError(f"--steps must be >= 1 (got {steps})")
    if threads is not None:   # its range: checked before the command starts (cli/checks.py)
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


@commands.command("csl")
def augment_csl(
    data: str = typer.Argument(..., help="data set name (scan/length, ...) or data file; its train split is induced from"),
    output: Path = typer.Option(..., "-o", "--output", help="samples TSV to write (x<TAB>y)"),
    config: str | None = typer.Option(None, "--config", help="scan or cogs: the reference's settings for SCAN or COGS (seed rules, target CFG, joint sampling); generic: SCAN's with up to 3 nonterminals a rule (default: cogs for the cogs data set, generic for a data file or folder, else scan)"),
    n: int = typer.Option(100_000, "--n", help="synthetic pairs to sample"),
    grammar: Path | None = typer.Option(None, "--grammar", help="reuse this grammar file instead of inducing one"),
    grammar_out: Path | None = typer.Option(None, "--grammar-out", help="write the grammar (source ### target, one rule a line)"),
    uniform: bool = typer.Option(False, "--uniform", help="sample rules uniformly, no model (the paper's ablation)"),
    states: int | None = typer.Option(None, "--states", help="latent states of the model (default: the config's)"),
    steps: int | None = typer.Option(None, "--steps", help="training steps of the model (default: the config's)"),
    temperature: float | None = typer.Option(None, "--temperature", help="sampling temperature of the fitted model's rule and state distributions (the reference: 1; higher flattens them toward --uniform)"),
    refine: bool = typer.Option(False, "--refine", help="after the search, drop or replace rules while that lowers the objective and every training pair stays derivable (the project's extension; the reference stops at the search's fixed point). Each try parses the training pairs that have the rule's words: 20 s on scan/simple"),
    dedup: bool = typer.Option(False, "--dedup", help="keep distinct samples that are not training pairs"),
    seed: int = typer.Option(0, "--seed", help="seeds the model's initialisation, its batches and the sampler"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    data_dir: Path | None = DataDir,
    x_field: str | None = XField,
    y_field: str | None = YField,
    columns: str | None = Columns,
) -> None:
    """CSL: induce a QCFG from the training pairs, fit its latent-state model, sample pairs."""
    if threads is not None:   # its range: checked before the command starts (cli/checks.py)
        torch.set_num_threads(threads)
    config = config or task_of(data).csl_preset()
    # the settings are checked before the data is read with these fields
    fields = fields_of(x_field, y_field, columns)
    with csl_progress() as progress:
        done = csl_augment_dataset(data, output, config, n, seed, uniform, dedup, grammar,
                                   grammar_out, states, steps, data_dir, progress,
                                   temperature=temperature, refine=refine, fields=fields)
    print_csl_summary(console, f"CSL {data} (config {config}{', uniform' if uniform else ''}"
                      f"{', refined' if refine else ''})",
                      done.result.summary, done.result.phases)
    if done.quality:
        q = done.quality
        console.print(f"samples: {q['novel_share']:.2%} novel, {q['scan_grammar_correct_share']:.2%} are SCAN "
                      f"commands (scan/tasks.txt) with the correct actions, {q['reading_correct_share']:.2%} "
                      "translate correctly by the SCAN reading (any nesting)", highlight=False, markup=False)
    rows = done.rows
    console.print(f"wrote {rows:,} pairs to {output}" + (f" and the grammar to {grammar_out}" if grammar_out else ""),
                  highlight=False, markup=False)
    for reason in done.result.warnings:
        log_with_flags(err_console)(f"warning: {reason}")
