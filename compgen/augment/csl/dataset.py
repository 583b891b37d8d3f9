"""CSL on a named data set, as `compgen augment csl` and the ``*-csl`` pipeline rows run
it: induce from the train split (or read a grammar), fit, sample, write the samples TSV
(and the grammar), and for SCAN measure the samples against the SCAN grammar.

COGS: the grammar is induced over variable-free targets (``cogs_lf``) with the IBM-1
seed rules and the COGS target CFG; the samples are turned back into COGS logical forms
(variables joined as ``x_1``, as ``compgen.data`` reads COGS), so the samples TSV trains
the predictor as it stands; samples without a logical form that reads back as the sampled
target (one-word targets, colliding variables) are dropped and counted."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from compgen.augment.csl.cogs_lf import from_variable_free, lemma_table, to_variable_free
from compgen.augment.csl.presets import preset
from compgen.augment.csl.rules import read_grammar, write_grammar
from compgen.augment.csl.run import CslResult, Progress, check_lengths, csl_augment
from compgen.augment.csl.seed_rules import cogs_seed_rules
from compgen.augment.csl.target_cfg import cogs_target_cfg
from compgen.data import select_split
from compgen.data.dataset import Dataset, open_dataset
from compgen.data.files import Fields
from compgen.data.scan import load_scan_grammar, scan_sample_report
from compgen.data.scan_semantics import correct_share
from compgen.data.sources import resolve_data_dir
from compgen.data.table import pairs as table_pairs
from compgen.data.task import task_of
from compgen.errors import SettingError, UserError
from compgen.io import write_samples_tsv


@dataclass
class CslDatasetResult:
    result: CslResult
    rows: int            # sample lines written
    quality: dict        # SCAN: novel / correct shares of the samples; else empty


def csl_augment_dataset(data: Dataset | str, output: str | Path, config: str = "scan",
                        n: int = 100_000,
                        seed: int = 0, uniform: bool = False, dedup: bool = False,
                        grammar: str | Path | None = None, grammar_out: str | Path | None = None,
                        states: int | None = None, steps: int | None = None,
                        data_dir: str | Path | None = None,
                        progress: Progress | None = None,
                        temperature: float | None = None,
                        refine: bool = False, fields: Fields | None = None) -> CslDatasetResult:
    """CSL on ``data`` (a Dataset, or a named set, file or folder read with ``fields`` once
    the settings are checked): induce (or read ``grammar``), fit, sample ``n`` pairs."""
    if n < 0:
        raise SettingError(f"`n` must be >= 0 (got {n})")
    for name, value in (("states", states), ("steps", steps)):
        if value is not None and value < 1:
            raise SettingError(f"`{name}` must be >= 1 (got {value})")
    if temperature is not None and not (math.isfinite(temperature) and temperature > 0):
        raise SettingError(f"`temperature` must be a finite number > 0 (got {temperature})")
    cfg = preset(config)
    if refine and grammar is not None:
        raise SettingError("`refine` applies to an induced grammar; leave out `grammar`")
    cfg = dataclasses.replace(cfg, induction=dataclasses.replace(cfg.induction, refine=refine),
                              model=dataclasses.replace(
        cfg.model, seed=seed, num_types=states or cfg.model.num_types,
        training_steps=steps or cfg.model.training_steps),
        sampler=dataclasses.replace(cfg.sampler, seed=seed,
                                    temperature=cfg.sampler.temperature if temperature is None
                                    else temperature))
    rules = read_grammar(grammar) if grammar is not None else None
    dataset = open_dataset(data, data_dir, fields)   # a Dataset as it is; a name read here
    data, table = dataset.name, dataset.table
    names = table["split"].unique().to_list() if "split" in table.columns else []
    train_table = select_split(table, "train") if "train" in names else table
    train = table_pairs(train_table)
    test = table_pairs(select_split(table, "test")) if "test" in names else []
    dev = table_pairs(select_split(table, "dev")) if "dev" in names else []
    if not train:
        raise UserError(f"{data}: no training examples")
    check_lengths(train, f"{data}: training")
    seeds, target_cfg, lemmas = (), None, None
    if data == "cogs":
        lemmas = lemma_table((x, " ".join(y)) for x, y in train)
        train, test, dev = _variable_free(train), _variable_free(test), _variable_free(dev)
        seeds = cogs_seed_rules(train) if rules is None else ()
        target_cfg = cogs_target_cfg([y for _, y in train])
    result = csl_augment(train, cfg, n, test, grammar=rules, uniform=uniform, dedup=dedup,
                         seeds=seeds, target_cfg=target_cfg, progress=progress, dev=dev)
    if lemmas is not None:
        drawn = len(result.samples)
        result.samples = _logical_forms(result.samples, lemmas)
        result.summary["samples"] = len(result.samples)
        result.summary["samples_without_a_logical_form"] = drawn - len(result.samples)
    if grammar_out is not None:
        write_grammar(grammar_out, result.rules,
                      header=f"CSL grammar induced from {data} (config {config})")
    rows = write_samples_tsv(output, result.samples)
    quality: dict = {}
    if task_of(data).scan:
        report = scan_sample_report(result.samples, train_table,
                                    load_scan_grammar(resolve_data_dir(data_dir)))
        quality = {"novel_share": report["novel_share"],
                   "scan_grammar_correct_share": report["correct_share"],
                   "reading_correct_share": correct_share(result.samples)}
    return CslDatasetResult(result, rows, quality)


def _variable_free(pairs):
    return [(x, to_variable_free(x, " ".join(y)).split()) for x, y in pairs]


def _logical_forms(samples, lemmas: dict[str, str]):
    """Variable-free COGS samples -> (sentence, logical form with joined variables). A
    sample is dropped when it has no logical form, or when its logical form does not read
    back as the sampled target (a word used more often than the sentence has it makes
    variables collide, e.g. ``eat . agent ( x_11 , x_11 )``)."""
    out = []
    for x, y in samples:
        if len(y) < 2:
            continue  # a one-word target is a primitive: no logical form without its lambda
        target = " ".join(y)
        try:
            lf = from_variable_free(x, target, lemmas)
            if to_variable_free(x, lf) != target:
                continue
        except (ValueError, UserError):
            continue
        out.append((x, lf.replace(" _ ", "_").split()))
    return out
