"""Forward sampling of synthetic pairs from a QCFG: at every expansion a rule is drawn
for the parent's slot (context) with the model's probabilities (or uniform weights),
NT rules forbidden at depth >= max_recursions and terminal rules below min_recursions."""

from __future__ import annotations

import bisect
import itertools
import math
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from compgen.augment.csl.forest import context_offsets
from compgen.augment.csl.rules import Rule, is_nt, nt_index
from compgen.errors import SettingError, UserError


@dataclass(frozen=True)
class SamplerConfig:
    min_recursions: int = 1
    max_recursions: int = 5
    temperature: float = 1.0
    nonterminal_bias: float = 0.0
    min_nonterminal_rule_arity: int = 1
    max_single_nt_applications: int = 1  # unary target-CFG rules per cell (joint sampler)
    seed: int = 0

    def validate(self) -> None:
        if self.min_recursions < 0 or self.max_recursions < self.min_recursions:
            raise UserError("sampling needs 0 <= min_recursions <= max_recursions "
                            f"(got {self.min_recursions}, {self.max_recursions})")
        if not (math.isfinite(self.temperature) and self.temperature > 0):
            raise UserError("sampling temperature must be a finite number > 0 (got "
                            f"{self.temperature})")


def check_terminal_rules(rules: Sequence[Rule]) -> None:
    """A grammar whose every rule has a nonterminal derives no finite pair: a UserError."""
    if rules and not any(r.arity == 0 for r in rules):
        raise UserError(f"every rule of the grammar ({len(rules)}) holds a nonterminal (NT_k): no "
                        "derivation can end; it needs rules without one (e.g. 'jump ### "
                        "I_JUMP')")


def model_weights(model, cfg: SamplerConfig) -> np.ndarray:
    """W[ctx, rule] = p(rule | ctx) at the sampling temperature, with the NT-rule bias."""
    with torch.no_grad():
        bias = torch.zeros(model.rule_logits.shape[1])
        for i, rule in enumerate(model.rules):
            if rule.arity >= cfg.min_nonterminal_rule_arity:
                bias[i] = cfg.nonterminal_bias
        scores = model.scores(cfg.temperature, bias)
    return np.exp(scores.numpy()[: model.n_contexts, : model.n_rules].astype(np.float64))


def uniform_weights(rules: Sequence[Rule], cfg: SamplerConfig) -> np.ndarray:
    """The no-model ablation: weight 1 (+ the bias for NT rules) in every context."""
    row = np.array([1.0 + (cfg.nonterminal_bias if r.arity >= cfg.min_nonterminal_rule_arity else 0.0)
                    for r in rules])
    return np.tile(row, (1 + sum(r.arity for r in rules), 1))


class QcfgSampler:
    """Draws derivations; ``weights[ctx, rule]`` are unnormalised (rules in sorted order)."""

    def __init__(self, rules: Sequence[Rule], weights: np.ndarray, cfg: SamplerConfig):
        cfg.validate()
        check_terminal_rules(rules)
        self.rules = sorted(rules)
        if weights.shape != (1 + sum(r.arity for r in self.rules), len(self.rules)):
            raise ValueError(f"weights shape {weights.shape} does not fit the grammar")
        self.cfg = cfg
        self.offsets = context_offsets(self.rules)
        nt_rules = np.array([r.arity > 0 for r in self.rules])
        # per mode (0: any rule, 1: terminal rules only, 2: NT rules only) and context:
        # the allowed rule ids and their cumulative weights
        self.tables = []
        for allowed in (np.ones_like(nt_rules), ~nt_rules, nt_rules):
            if not allowed.any():  # nothing of that kind: fall back to every rule
                allowed = np.ones_like(nt_rules)
            ids = np.flatnonzero(allowed)
            per_ctx = []
            for ctx in range(weights.shape[0]):
                cum = list(itertools.accumulate(weights[ctx, ids].tolist()))
                per_ctx.append((ids.tolist(), cum))
            self.tables.append(per_ctx)
        self.templates = [tuple(nt_index(t) - 1 if is_nt(t) else t for t in side)
                          for r in self.rules for side in (r.source, r.target)]
        self.rng = random.Random(cfg.seed)

    def _draw(self, ctx: int, depth: int) -> int:
        mode = 1 if depth >= self.cfg.max_recursions else 2 if depth < self.cfg.min_recursions else 0
        ids, cum = self.tables[mode][ctx]
        if cum[-1] <= 0:
            raise UserError("sampling weights of a context are all zero")
        return ids[bisect.bisect_right(cum, self.rng.random() * cum[-1])]

    def _expand(self, ctx: int, depth: int) -> tuple[list[str], list[str]]:
        rid = self._draw(ctx, depth)
        arity = self.rules[rid].arity
        children = [self._expand(int(self.offsets[rid]) + k, depth + 1) for k in range(arity)]
        out = []
        for side, template in enumerate(self.templates[2 * rid: 2 * rid + 2]):
            tokens: list[str] = []
            for piece in template:
                if isinstance(piece, int):
                    tokens.extend(children[piece][side])
                else:
                    tokens.append(piece)
            out.append(tokens)
        return out[0], out[1]

    def sample(self) -> tuple[list[str], list[str]]:
        return self._expand(0, 0)

    def samples(self, n: int, dedup: bool = False,
                progress: Callable[[int], None] | None = None,
                exclude: Iterable[tuple[Sequence[str], Sequence[str]]] = ()) -> list[tuple[list[str], list[str]]]:
        return draw_samples(self.sample, n, dedup, progress, exclude)


def draw_samples(sample: Callable[[], tuple[list[str], list[str]]], n: int, dedup: bool = False,
                 progress: Callable[[int], None] | None = None,
                 exclude: Iterable[tuple[Sequence[str], Sequence[str]]] = ()) -> list[tuple[list[str], list[str]]]:
    """``n`` pairs from ``sample()``; ``dedup``: distinct pairs only, none of ``exclude``
    (the training pairs)."""
    out, seen = [], {(tuple(x), tuple(y)) for x, y in exclude} if dedup else set()
    attempts = 0
    while len(out) < n:
        attempts += 1
        if dedup and attempts > 100 * n + 1000:
            raise SettingError(f"could not draw {n} distinct samples (got {len(out)})"
                               + (" that are not training pairs; ask for fewer with `n`"
                                  if exclude else ""))
        x, y = sample()
        if dedup:
            key = (tuple(x), tuple(y))
            if key in seen:
                continue
            seen.add(key)
        out.append((x, y))
        if progress is not None and len(out) % 1000 == 0:
            progress(len(out))
    return out
