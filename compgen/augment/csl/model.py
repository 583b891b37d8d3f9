"""The parametric QCFG: p(rule | parent rule, slot) = sum over latent states s of
p(s | parent, slot) p(rule | s), two logit matrices A (contexts x states) and B (states x
rules); the inside algorithm over parse forests in log space; Adam training; Viterbi
parsing (CSL as a parser)."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from compgen.augment.csl.chart import LEAF, RuleIndex, parse
from compgen.augment.csl.forest import Forest, PackedBatch, context_offsets, pack
from compgen.augment.csl.rules import Rule
from compgen.errors import UserError
from compgen.io import keep_torch_compiler_cache


@dataclass(frozen=True)
class ModelConfig:
    num_types: int = 2
    batch_size: int = 256
    learning_rate: float = 0.01
    training_steps: int = 1000
    num_lhs_emb: int = 25
    num_rhs_emb: int = 15
    max_single_nt_applications: int = 0
    seed: int = 0

    def validate(self) -> None:
        for name in ("num_types", "batch_size", "training_steps"):
            if getattr(self, name) < 1:
                raise UserError(f"model {name} must be >= 1 (got {getattr(self, name)})")
        if not self.learning_rate > 0:
            raise UserError(f"model learning_rate must be > 0 (got {self.learning_rate})")


def log_matmul_exp(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """log(exp(a) @ exp(b)), stable: subtract row / column maxima first."""
    a_max = a.max(dim=1, keepdim=True).values
    b_max = b.max(dim=0, keepdim=True).values
    return torch.log(torch.exp(a - a_max) @ torch.exp(b - b_max)) + a_max + b_max


class QcfgModel(torch.nn.Module):
    """Scores S[ctx, rule] = log p(rule | ctx) for the rules of a grammar (sorted order)."""

    def __init__(self, rules: Sequence[Rule], cfg: ModelConfig):
        super().__init__()
        self.rules = sorted(rules)
        self.offsets = context_offsets(self.rules)
        self.n_rules = len(self.rules)
        self.n_contexts = 1 + sum(r.arity for r in self.rules)
        n_lhs = max(cfg.num_lhs_emb, self.n_rules)
        n_rhs = max(cfg.num_rhs_emb, self.n_contexts)
        gen = torch.Generator().manual_seed(cfg.seed)
        self.context_logits = torch.nn.Parameter(torch.randn(n_rhs, cfg.num_types, generator=gen) * 0.05)
        self.rule_logits = torch.nn.Parameter(torch.randn(cfg.num_types, n_lhs, generator=gen) * 0.05)

    def scores(self, temperature: float = 1.0, rule_bias: torch.Tensor | None = None) -> torch.Tensor:
        """S[ctx, rule] over all capacity rows and columns (unused ones included)."""
        state = torch.log_softmax(self.context_logits / temperature, dim=1)
        rule_logits = self.rule_logits / temperature
        if rule_bias is not None:
            rule_logits = rule_logits + rule_bias
        return log_matmul_exp(state, torch.log_softmax(rule_logits, dim=1))

    def ctx(self, rule_id: int, slot: int) -> int:
        return int(self.offsets[rule_id]) + slot


def inside(scores: torch.Tensor, batch: PackedBatch) -> torch.Tensor:
    """log p(x, y) of every example of the batch: sum over the derivations in its forest."""
    values = torch.zeros(batch.n_nodes, dtype=scores.dtype)
    for nodes, alt_local_node, entry_local_alt, entry_child, entry_ctx, entry_rule in batch.levels:
        n_alts = alt_local_node.size
        if entry_child.size:
            term = scores[torch.from_numpy(entry_ctx), torch.from_numpy(entry_rule)] + values[torch.from_numpy(entry_child)]
            alt_score = torch.zeros(n_alts, dtype=scores.dtype).index_add(0, torch.from_numpy(entry_local_alt), term)
        else:
            alt_score = torch.zeros(n_alts, dtype=scores.dtype)
        node_index = torch.from_numpy(alt_local_node)
        node_value = _scatter_logsumexp(alt_score, node_index, nodes.size)
        values = values.index_put((torch.from_numpy(nodes),), node_value)
    roots = torch.from_numpy(batch.root_node)
    root_rules = torch.from_numpy(batch.node_rule[batch.root_node])
    root_score = scores[0, root_rules] + values[roots]
    return _scatter_logsumexp(root_score, torch.from_numpy(batch.root_example), batch.n_examples)


def _scatter_logsumexp(x: torch.Tensor, group: torch.Tensor, n: int) -> torch.Tensor:
    top = torch.full((n,), -math.inf, dtype=x.dtype).scatter_reduce(0, group, x.detach(), "amax")
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    total = torch.zeros(n, dtype=x.dtype).index_add(0, group, torch.exp(x - top[group]))
    return torch.log(total) + top


@dataclass
class TrainLog:
    losses: list[float]
    seconds: float


def train_model(model: QcfgModel, forests: Sequence[Forest], cfg: ModelConfig,
                progress: Callable[[int, float], None] | None = None) -> TrainLog:
    """Adam on the mean negative log-likelihood of batches of forests; the data is
    reshuffled on every pass."""
    if not forests:
        raise UserError("no parse forests to train the CSL model on")
    keep_torch_compiler_cache()  # before torch makes its cache folder in /tmp
    opt = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, betas=(0.9, 0.999), eps=1e-7)
    rng = random.Random(cfg.seed)
    order: list[int] = []
    losses = []
    start = time.perf_counter()
    for step in range(cfg.training_steps):
        batch_ids = []
        while len(batch_ids) < min(cfg.batch_size, len(forests)):
            if not order:
                order = list(range(len(forests)))
                rng.shuffle(order)
            batch_ids.append(order.pop())
        batch = pack([forests[i] for i in batch_ids])
        loss = -inside(model.scores(), batch).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
        if progress is not None:
            progress(step + 1, losses[-1])
    return TrainLog(losses, time.perf_counter() - start)


def viterbi_parse(tokens: Sequence[str], index: RuleIndex, scores: np.ndarray, offsets: np.ndarray,
                  max_unary: int = 0, max_items: int | None = 2000) -> str | None:
    """The target of the most probable derivation of ``tokens`` (None: no parse)."""
    chart = parse(tokens, index, max_unary=max_unary, max_items=max_items)
    best: dict = {}
    for cell in chart.cells.values():  # cells come shortest first; within a cell, children first
        for key, alts in cell.items():
            if key[3] == LEAF:
                best[key] = 0.0
                continue
            value = -math.inf
            for alt in alts:
                total = 0.0
                for slot, child in enumerate(alt):
                    child_best = best.get(child)
                    if child_best is None:
                        total = -math.inf
                        break
                    total += child_best + scores[offsets[key[3]] + slot, child[3]]
                value = max(value, total)
            best[key] = value
    top = [(best[key] + scores[0, key[3]], key[2]) for key in chart.top() if key[3] != LEAF]
    if not top:
        return None
    return max(top)[1]
