"""`compgen augment stem-corrupt` and `compgen select`: STEM-CORRUPT pools and the
strategies that choose which synthetic triples to train on."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch
import typer

from compgen.augment.selection import LOSS_STRATEGIES, check_strategy
from compgen.augment.stem_corrupt.corrupt import (
    read_triples,
    stem_corrupt_pool,
    training_file,
    write_triples,
)
from compgen.cli.common import DataDir, DeviceOption, console
from compgen.configs.stem_corrupt_run import StemCorruptRunConfig
from compgen.device import resolve_device
from compgen.errors import UserError, not_a_file
from compgen.pipelines.stem_corrupt import evaluate_model, gold_and_dev, pool_scores, select_rows
from compgen.training.inflection import train_inflection
from compgen.training.stem_corrupt_preset import corrupt_config, stem_corrupt_preset

# its commands, listed in compgen.cli.commands: augment stem-corrupt, train inflection,
# select and inflection evaluate
commands = typer.Typer()

StemCorruptConfigOption = typer.Option(
    None, "--config", help="a STEM-CORRUPT preset file read over the bundled one (compgen presets stem_corrupt); the options given here override it")


@commands.command("stem-corrupt")
def augment_stem_corrupt(
    lang: str = typer.Argument(..., help="SIGMORPHON language (its train-low file is used) or a lemma<TAB>form<TAB>tags file"),
    output: Path = typer.Option(..., "-o", "--output", help="pool to write (lemma<TAB>form<TAB>tags)"),
    pool: int | None = typer.Option(None, "--pool", help="synthetic triples to make (default: the preset's)"),
    seed: int | None = typer.Option(None, "--seed", help="seeds the aligner and the substitution (default: the preset's)"),
    iterations: int | None = typer.Option(None, "--iterations", help="Gibbs sweeps of the aligner (default: the preset's)"),
    compat: bool | None = typer.Option(None, "--compat/--paper", help="the reference aligner's count quirks and unseeded stream (default: the preset's: the paper's sampler, seeded)"),
    config_file: Path | None = StemCorruptConfigOption,
    data_dir: Path | None = DataDir,
) -> None:
    """STEM-CORRUPT: align lemma/form pairs, replace stem characters, write a pool."""
    config = corrupt_config(stem_corrupt_preset(config_file), pool_size=pool, seed=seed,
                            iterations=iterations, compat=compat)
    config.validate()
    triples = read_triples(training_file(lang, data_dir))
    start = time.perf_counter()
    with console.status("STEM-CORRUPT ...") as status:
        rows = stem_corrupt_pool(triples, config,
                                 progress=lambda n: status.update(f"STEM-CORRUPT: {n:,}/{config.pool_size:,}"))
    write_triples(output, rows)
    console.print(f"wrote {len(rows):,} synthetic triples from {len(triples)} gold ones to {output} "
                  f"in {time.perf_counter() - start:.1f} s", highlight=False, markup=False)


def _threads(threads: int | None) -> None:
    if threads is not None:   # its range: checked before the command starts (cli/checks.py)
        torch.set_num_threads(threads)


def _train_config(config_file: Path | None, **given: int | None):
    """The preset's ``[train]`` (and ``[model]``) with the options given on the command line."""
    train = stem_corrupt_preset(config_file).train
    cfg = dataclasses.replace(train, **{k: v for k, v in given.items() if v is not None})
    cfg.validate()
    return cfg


@commands.command("inflection")   # compgen train inflection
def train_inflection_cmd(
    lang: str = typer.Argument(..., help="SIGMORPHON language: trains on its train-low, validates on its dev"),
    output: Path = typer.Option(..., "-o", "--output", help="checkpoint to write (safetensors)"),
    augment: list[Path] = typer.Option([], "--augment", help="synthetic triples added to the gold ones (lemma<TAB>form<TAB>tags); repeatable"),
    updates: int | None = typer.Option(None, "--updates", help="optimizer updates (default: the preset's)"),
    warmup: int | None = typer.Option(None, "--warmup", help="inverse-sqrt warm-up updates (default: the preset's)"),
    validate_every: int | None = typer.Option(None, "--validate-every", help="dev loss every N updates (0 = after an epoch, spaced to cost at most ~10 % of training; default: the preset's)"),
    seed: int | None = typer.Option(None, "--seed", help="random seed of initialisation, batches and dropout (default: the preset's)"),
    config_file: Path | None = StemCorruptConfigOption,
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    device: str | None = DeviceOption,
    data_dir: Path | None = DataDir,
) -> None:
    """Train the character Transformer inflection model (gold train-low + augment files)."""
    dev = resolve_device(device)
    cfg = _train_config(config_file, updates=updates, warmup=warmup,
                        validate_every=validate_every, seed=seed)
    gold, dev_rows = gold_and_dev(lang, data_dir)
    extra = [row for path in augment for row in read_triples(path)]
    _threads(threads)
    state = train_inflection(gold + extra, dev_rows, output, cfg, lang=lang,
                             log=lambda line: console.print(line, highlight=False, markup=False),
                             device=dev)
    console.print(f"wrote {output}: {len(gold)} gold + {len(extra)} synthetic rows, "
                  f"{state['updates']} updates in {state['seconds']:.0f} s on {dev}, best dev loss "
                  f"{state['best_dev_loss']:.4f} at update {state['best_update']}",
                  highlight=False, markup=False)


@commands.command("select")
def select_cmd(
    pool: Path = typer.Argument(..., help="synthetic pool (lemma<TAB>form<TAB>tags)"),
    output: Path = typer.Option(..., "-o", "--output", help="subset to write (same format)"),
    strategy: str = typer.Option("random", "--strategy", help="random | umt | emt | highloss | lowloss | umt+loss | emt+loss"),
    size: int = typer.Option(..., "--size", help="rows to select"),
    scorer: Path | None = typer.Option(None, "--scorer", help="inflection model trained on the gold rows (needed by the loss strategies)"),
    scores: Path | None = typer.Option(None, "--scores", help="cache of the pool's uncertainty scores (read if present, else written)"),
    uncertainty: str | None = typer.Option(None, "--uncertainty", help="hypothesis (score of the beam's best output, the reference code) | reference (NLL of the pool's form, the paper); default: the preset's"),
    seed: int = typer.Option(0, "--seed", help="random seed of the random and tag-drawing strategies"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
) -> None:
    """Choose SIZE synthetic triples of POOL with a selection strategy."""
    key = check_strategy(strategy)
    if uncertainty is None:
        uncertainty = StemCorruptRunConfig.uncertainty
    if uncertainty not in ("hypothesis", "reference"):
        raise UserError(f"--uncertainty must be hypothesis or reference (got {uncertainty!r})")
    if key in LOSS_STRATEGIES and scorer is None and (scores is None or not scores.is_file()):
        raise UserError(f"--strategy {key} needs --scorer MODEL (or an existing --scores file)")
    if scorer is not None and not scorer.is_file():
        raise UserError(f"--scorer {scorer}: {not_a_file(scorer)}")
    rows = read_triples(pool)
    if size > len(rows):
        raise UserError(f"--size {size} is larger than the pool {pool} ({len(rows)} rows)")
    _threads(threads)
    nll = pool_scores(rows, scorer, scores, uncertainty) if key in LOSS_STRATEGIES else None
    chosen = select_rows(rows, key, size, nll, seed)
    write_triples(output, chosen)
    console.print(f"wrote {len(chosen):,} of {len(rows):,} rows ({key}) to {output}",
                  highlight=False, markup=False)


@commands.command("evaluate")   # compgen inflection evaluate
def inflection_evaluate_cmd(
    model: Path = typer.Argument(..., help="inflection checkpoint"),
    lang: str = typer.Option(..., "--lang", help="SIGMORPHON language"),
    test: str = typer.Option("lemma-split", "--test", help="lemma-split (1000 rows, seed 0) | test (the shared-task test file)"),
    beam: int | None = typer.Option(None, "--beam", help="beam width (default: the preset's, the reference's)"),
    predictions: Path | None = typer.Option(None, "--predictions", help="write lemma<TAB>gold<TAB>predicted<TAB>tags"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    device: str | None = DeviceOption,
    data_dir: Path | None = DataDir,
) -> None:
    """Exact-match accuracy of an inflection model (beam search)."""
    if beam is None:
        beam = StemCorruptRunConfig.beam
    if beam < 1:
        raise UserError("--beam must be >= 1")
    dev = resolve_device(device)
    _threads(threads)
    result = evaluate_model(model, lang, test, beam, data_dir, predictions, dev)
    console.print(f"{lang} {test}: exact match {result['accuracy']:.4f} on {result['rows']} rows "
                  f"({result['seconds']:.0f} s on {result['device']})", highlight=False, markup=False)
