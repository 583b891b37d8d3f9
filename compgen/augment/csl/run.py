"""CSL end to end: induce a grammar (or read one), fit the model on the parse forests of
the training pairs, sample synthetic pairs; plus grammar evaluation (coverage, parsing)."""

from __future__ import annotations

import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from compgen.augment.csl.chart import RuleIndex, parse
from compgen.augment.csl.forest import build_forest
from compgen.augment.csl.induction import induce, sorted_examples
from compgen.augment.csl.joint_sampler import JointSampler
from compgen.augment.csl.model import ModelConfig, QcfgModel, train_model, viterbi_parse
from compgen.augment.csl.presets import CslConfig
from compgen.augment.csl.rules import Rule
from compgen.augment.csl.sampler import (
    QcfgSampler,
    check_terminal_rules,
    model_weights,
    uniform_weights,
)
from compgen.augment.csl.target_cfg import CfgRule, TargetChecker
from compgen.augment.usefulness import csl_reasons
from compgen.errors import SettingError, UserError

Pairs = Sequence[tuple[Sequence[str], Sequence[str]]]
# progress(phase, done, total): total None = unknown
Progress = Callable[[str, int, "int | None"], None]


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


@dataclass
class Phases:
    """Wall time and peak RSS (process peak so far) after each phase."""

    rows: list[dict] = field(default_factory=list)
    _start: float = field(default_factory=time.perf_counter)

    def done(self, name: str, **extra) -> None:
        now = time.perf_counter()
        self.rows.append({"phase": name, "seconds": round(now - self._start, 2),
                          "peak_rss_mb": round(peak_rss_mb(), 1), **extra})
        self._start = now


def derivable_share(rules: Sequence[Rule], pairs: Pairs, max_unary: int = 0,
                    progress: Progress | None = None, phase: str = "coverage") -> float:
    """Share of pairs the grammar derives (the target is among the source's parses)."""
    if not pairs:
        return float("nan")
    index = RuleIndex(sorted(rules))
    ok = 0
    for i, (x, y) in enumerate(pairs):
        gold = " ".join(y)
        ok += gold in parse(x, index, keep=gold.__contains__, max_unary=max_unary, record=False).top_targets()
        if progress is not None and (i + 1) % 500 == 0:
            progress(phase, i + 1, len(pairs))
    return ok / len(pairs)


def fit_model(rules: Sequence[Rule], pairs: Pairs, cfg: ModelConfig, progress: Progress | None = None,
              phases: Phases | None = None) -> tuple[QcfgModel, int]:
    """Train the model on the forests of the (deduplicated) pairs; returns it and the
    number of pairs without a parse (left out)."""
    cfg.validate()
    torch.manual_seed(cfg.seed)
    model = QcfgModel(rules, cfg)
    index = RuleIndex(model.rules)
    examples = sorted_examples(pairs, dedup=True)
    forests, missing = [], 0
    for i, (x, y) in enumerate(examples):
        forest = build_forest(x, y, index, model.offsets, cfg.max_single_nt_applications)
        if forest is None:
            missing += 1
        else:
            forests.append(forest)
        if progress is not None and (i + 1) % 1000 == 0:
            progress("forests", i + 1, len(examples))
    if phases is not None:
        phases.done("forests", forests=len(forests), unparsed=missing)
    train_model(model, forests, cfg, progress=None if progress is None else
                (lambda step, loss: progress("fit", step, cfg.training_steps)))
    if phases is not None:
        phases.done("fit", steps=cfg.training_steps)
    return model, missing


def parser_exact_match(model: QcfgModel, pairs: Pairs, max_unary: int = 0,
                       progress: Progress | None = None) -> float:
    """CSL as a parser: the Viterbi derivation's target equals the reference."""
    if not pairs:
        return float("nan")
    index = RuleIndex(model.rules)
    with torch.no_grad():
        scores = model.scores().numpy().astype(np.float64)
    ok = 0
    for i, (x, y) in enumerate(pairs):
        ok += viterbi_parse(x, index, scores, model.offsets, max_unary) == " ".join(y)
        if progress is not None and (i + 1) % 500 == 0:
            progress("parse", i + 1, len(pairs))
    return ok / len(pairs)


@dataclass
class CslResult:
    rules: list[Rule]
    samples: list[tuple[list[str], list[str]]]
    summary: dict
    phases: list[dict]
    warnings: list[str] = field(default_factory=list)   # why the samples cannot help


# induction compares every span of a pair with every other, and fitting parses every span
# (measured on 3 random pairs: 200 tokens a side induce in 1.8 s, 400 in 7.6 s; 3,000 take minutes
# a step of 16): a line longer than this is refused before any work
MAX_TOKENS = 400


def check_lengths(pairs: Pairs, split: str) -> None:
    for number, (x, y) in enumerate(pairs, 1):
        if max(len(x), len(y)) > MAX_TOKENS:
            side, tokens = ("input", x) if len(x) >= len(y) else ("output", y)
            raise UserError(f"{split} example {number}: {len(tokens):,} {side} tokens "
                            f"({' '.join(tokens[:6])} …); CSL reads pairs of at most "
                            f"{MAX_TOKENS} tokens a side (its chart grows with the cube of "
                            "a pair's length)")


def csl_augment(train: Pairs, cfg: CslConfig, n_samples: int, test: Pairs = (),
                grammar: Sequence[Rule] | None = None, uniform: bool = False, dedup: bool = False,
                seeds: Sequence[Rule] = (), target_cfg: Sequence[CfgRule] | None = None,
                progress: Progress | None = None, dev: Pairs = ()) -> CslResult:
    """Induce (unless ``grammar`` is given) -> fit (unless ``uniform``) -> sample.
    ``seeds``: rules induction starts from and keeps; ``target_cfg`` (COGS): induction
    only proposes targets the CFG parses, and sampling keeps every target derivable from
    its ROOT. ``dev`` and ``test`` pairs are only measured (their derivable share)."""
    if n_samples < 0:
        raise SettingError(f"`n` must be >= 0 (got {n_samples})")
    check_lengths(train, "training")
    phases = Phases()
    summary: dict = {"train_pairs": len(train), "test_pairs": len(test)}
    if dev:
        summary["dev_pairs"] = len(dev)
    if grammar is None:
        checker = TargetChecker(target_cfg) if target_cfg is not None else None
        result = induce(train, cfg.induction, seeds=seeds,
                        target_ok=None if checker is None else checker.can_parse,
                        progress=None if progress is None else
                        (lambda info: progress("induce", info["partition"] + 1, info["partitions"])))
        summary["seed_rules"] = len(seeds)
        rules = result.rules
        if cfg.induction.refine:
            summary["refinements"] = len(result.refinements)
        phases.done("induce", steps=len(result.steps))
    else:
        rules = sorted(grammar)
        phases.done("read grammar")
    summary["rules"] = len(rules)
    check_terminal_rules(rules)
    unary = cfg.model.max_single_nt_applications
    if uniform:  # (with a model, the forests of the training pairs give their coverage)
        summary["train_coverage"] = derivable_share(rules, train, unary, progress, "train coverage")
    if dev:
        summary["dev_coverage"] = derivable_share(rules, dev, unary, progress, "dev coverage")
    if test:
        summary["test_coverage"] = derivable_share(rules, test, unary, progress, "test coverage")
    phases.done("coverage")
    if uniform:
        weights = uniform_weights(sorted(rules), cfg.sampler)
    else:
        model, missing = fit_model(rules, train, cfg.model, progress, phases)
        distinct = len(sorted_examples(train, dedup=True))
        summary["train_coverage"] = (distinct - missing) / distinct
        summary["unparsed_train_pairs"] = missing
        weights = model_weights(model, cfg.sampler)
    if target_cfg is None:
        sampler = QcfgSampler(rules, weights, cfg.sampler)
    else:
        sampler = JointSampler(rules, weights, cfg.sampler, target_cfg,
                               max_unary=cfg.sampler.max_single_nt_applications)
        summary["rules_without_a_target_parse"] = sampler.dropped
    # dedup: distinct samples that are not already training pairs
    samples = sampler.samples(n_samples, dedup=dedup, progress=None if progress is None else
                              (lambda done: progress("sample", done, n_samples)), exclude=train)
    phases.done("sample", samples=len(samples))
    summary["samples"] = len(samples)
    return CslResult(rules, samples, summary, phases.rows, csl_reasons(summary, samples, train))


def evaluate_grammar(rules: Sequence[Rule], train: Pairs, test: Pairs, cfg: ModelConfig,
                     progress: Progress | None = None) -> tuple[dict, list[dict]]:
    """Coverage of train and test, and the test exact match of the Viterbi parser whose
    model is fitted on the train forests."""
    phases = Phases()
    unary = cfg.max_single_nt_applications
    summary: dict = {"train_pairs": len(train), "test_pairs": len(test), "rules": len(rules),
                     "test_coverage": derivable_share(rules, test, unary, progress, "test coverage")}
    phases.done("coverage")
    model, missing = fit_model(rules, train, cfg, progress, phases)
    distinct = len(sorted_examples(train, dedup=True))
    summary["train_coverage"] = (distinct - missing) / distinct
    summary["unparsed_train_pairs"] = missing
    summary["test_exact_match"] = parser_exact_match(model, test, unary, progress)
    phases.done("parse test")
    return summary, phases.rows
