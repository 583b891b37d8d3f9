"""Grammar induction: greedy search for a small QCFG that derives every training pair.

Objective L(G) = sum over rules of size(r) + penalty(r) (``derive.PenaltyStats``). The
examples are sorted by source length and split into partitions (a curriculum); each
partition adds its example rules, then up to ``max_num_steps`` steps compute, for every
rule against the same grammar, the best action (drop a derivable rule, or add a unifier
and drop the rules it makes redundant) and apply the union of all actions. With
``refine`` (not the reference's), :mod:`compgen.augment.csl.refine` follows the search.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from compgen.augment.csl.chart import RuleIndex, derivable
from compgen.augment.csl.derive import PenaltyStats, SideIndex, can_maybe_derive
from compgen.augment.csl.refine import refine
from compgen.augment.csl.rules import Rule, example_rule
from compgen.augment.csl.unify import UnifyConfig, unify
from compgen.errors import UserError

MAX_RELEVANT = 10  # rules checked for extra removals per candidate (the shortest ones)


@dataclass(frozen=True)
class InductionConfig:
    allow_repeated_target_nts: bool = True
    allow_single_nt_target: bool = True
    max_num_nts: int = 2
    non_terminal_coef: float = 1.0
    terminal_coef: float = 4.0
    source_given_target_coef: float = 0.0
    target_given_source_coef: float = 100.0
    max_num_steps: int = 5
    num_partitions: int = 16
    allow_duplicate_examples: bool = False
    use_rule_penalty: bool = True
    max_single_nt_applications: int = 2
    refine: bool = False  # the project's refinement after the search (csl/refine.py); not the reference's

    def validate(self) -> None:
        if self.max_num_nts < 1 or self.max_num_nts > 9:
            raise UserError(f"max_num_nts must be in 1..9 (got {self.max_num_nts})")
        if self.num_partitions < 1 or self.max_num_steps < 0:
            raise UserError("num_partitions must be >= 1 and max_num_steps >= 0")

    @property
    def unify_config(self) -> UnifyConfig:
        return UnifyConfig(self.allow_repeated_target_nts, self.allow_single_nt_target, self.max_num_nts)


@dataclass
class InductionResult:
    rules: list[Rule]
    examples: list[tuple[tuple[str, ...], tuple[str, ...]]]
    steps: list[dict] = field(default_factory=list)  # per step: partition, step, rules, added, removed, seconds
    refinements: list[dict] = field(default_factory=list)  # per kept refinement move


def sorted_examples(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], dedup: bool):
    """Examples as token tuples, deduplicated if asked, sorted by the character length of
    the source string, then by the pair."""
    items = [(tuple(x), tuple(y)) for x, y in pairs]
    if dedup:
        items = list(dict.fromkeys(items))
    return sorted(items, key=lambda p: (len(" ".join(p[0])), p))


def partition_bounds(n: int, parts: int) -> list[int]:
    """End index of each of ``parts`` contiguous chunks (numpy.array_split sizes)."""
    return [int(chunk[-1]) + 1 if len(chunk) else 0
            for chunk in np.array_split(np.arange(n), parts)]


class _Search:
    """One grammar snapshot's action selection, with per-step and per-stage caches."""

    def __init__(self, cfg: InductionConfig, penalty: PenaltyStats, seeds: set[Rule],
                 target_ok: Callable[[tuple[str, ...]], bool] | None):
        self.cfg, self.penalties, self.seeds, self.target_ok = cfg, penalty, seeds, target_ok
        self.ucfg = cfg.unify_config
        self._size: dict[Rule, float] = {}

    def size(self, rule: Rule) -> float:
        value = self._size.get(rule)
        if value is None:
            value = self._size[rule] = rule.size(self.cfg.non_terminal_coef, self.cfg.terminal_coef)
        return value

    def penalty(self, rule: Rule) -> float:
        return self.penalties.penalty(rule) if self.cfg.use_rule_penalty else 0.0

    def snapshot(self, grammar: set[Rule]) -> None:
        self.rules = sorted(grammar)
        self.grammar = grammar
        self.ids = {r: i for i, r in enumerate(self.rules)}
        self.index = RuleIndex(self.rules)
        self.src_terms = [r.terminals() for r in self.rules]
        self.tgt_terms = [frozenset(t for t in r.target if not t.startswith("NT_")) for r in self.rules]
        self.src_postings: dict[str, set[int]] = {}
        for i, terms in enumerate(self.src_terms):
            for t in terms:
                self.src_postings.setdefault(t, set()).add(i)
        self.all_ids = set(range(len(self.rules)))
        self.src_posting_arrays = {t: np.fromiter(sorted(ids), dtype=np.int64)
                                   for t, ids in self.src_postings.items()}
        self.n_src_terms = np.array([len(terms) for terms in self.src_terms], dtype=np.int64)
        self._extra: dict[Rule, frozenset[Rule]] = {}

    def _containing(self, terms) -> set[int]:
        """Rule ids whose source has every token of ``terms``."""
        ids = None
        for t in terms:
            posting = self.src_postings.get(t, set())
            ids = set(posting) if ids is None else ids & posting
            if not ids:
                return set()
        return set(self.all_ids) if ids is None else ids

    def _may_derive_rules(self, rule: Rule) -> list[int]:
        """Rules r' that may derive ``rule`` (both sides), by can_maybe_derive; only
        rules whose source terminals all occur in ``rule``'s source are tested (found by
        counting posting hits, not by scanning the grammar)."""
        src_tokens, tgt_tokens = set(rule.source), set(rule.target)
        lists = [self.src_posting_arrays[t] for t in src_tokens if t in self.src_posting_arrays]
        hits = np.bincount(np.concatenate(lists), minlength=len(self.rules)) if lists else None
        covered = (hits == self.n_src_terms) if hits is not None else (self.n_src_terms == 0)
        out = []
        for i in np.flatnonzero(covered | (self.n_src_terms == 0)).tolist():
            other = self.rules[i]
            if (self.tgt_terms[i] <= tgt_tokens and can_maybe_derive(other.source, rule.source)
                    and can_maybe_derive(other.target, rule.target)):
                out.append(i)
        return out

    def extra_removals(self, c: Rule) -> frozenset[Rule]:
        """Rules q = c∘g or g∘c for some g already in the grammar."""
        cached = self._extra.get(c)
        if cached is not None:
            return cached
        c_tgt_terms = {t for t in c.target if not t.startswith("NT_")}
        relevant = []
        for i in self._containing(c.terminals()):
            q = self.rules[i]
            if (c_tgt_terms <= set(q.target) and can_maybe_derive(c.source, q.source)
                    and can_maybe_derive(c.target, q.target)):
                relevant.append(i)
        relevant.sort(key=lambda i: (len(self.rules[i].source) + len(self.rules[i].target), i))
        out = set()
        for i in relevant[:MAX_RELEVANT]:
            q = self.rules[i]
            if q in self.seeds or q == c:
                continue
            if any(g in self.grammar for g in unify(q, c, self.ucfg)):
                out.add(q)
        result = self._extra[c] = frozenset(out)
        return result

    def select_action(self, rule: Rule) -> tuple[set[Rule], set[Rule]]:
        """(rules to add, rules to remove) chosen for ``rule``; both empty = no action."""
        if rule in self.seeds:
            return set(), set()
        rid = self.ids[rule]
        if derivable(rule, self.index, rid, self.cfg.max_single_nt_applications):
            return set(), {rule}
        candidates: set[Rule] = set()
        for i in self._may_derive_rules(rule):
            if i != rid:
                candidates |= unify(rule, self.rules[i], self.ucfg)
        scored = []
        for c in candidates:
            if self.target_ok is not None and not self.target_ok(c.target):
                continue
            removed = {rule} | self.extra_removals(c)
            delta = sum(self.size(q) for q in removed) - self.size(c)
            scored.append((-delta, c, removed))
        scored.sort(key=lambda item: (item[0], item[1]))
        best, best_delta = (set(), set()), 0.0
        for neg_delta, c, removed in scored:
            delta = -neg_delta
            if delta <= best_delta:  # penalties are assumed only to lower the total
                break
            total = delta + sum(self.penalty(q) for q in removed) - self.penalty(c)
            if total > best_delta:
                best, best_delta = ({c}, removed), total
        return best


def induce(pairs: Sequence[tuple[Sequence[str], Sequence[str]]], cfg: InductionConfig,
           seeds: Sequence[Rule] = (), target_ok: Callable[[tuple[str, ...]], bool] | None = None,
           progress: Callable[[dict], None] | None = None) -> InductionResult:
    """Run the greedy search over length-sorted partitions; returns the final grammar."""
    cfg.validate()
    examples = sorted_examples(pairs, dedup=not cfg.allow_duplicate_examples)
    if not examples:
        raise UserError("no training examples to induce a grammar from")
    penalty = PenaltyStats(SideIndex([x for x, _ in examples]), SideIndex([y for _, y in examples]),
                           cfg.source_given_target_coef, cfg.target_given_source_coef)
    seed_set = set(seeds)
    search = _Search(cfg, penalty, seed_set, target_ok)
    grammar: set[Rule] = set(seed_set)
    result = InductionResult([], examples)
    start = 0
    for part, end in enumerate(partition_bounds(len(examples), cfg.num_partitions)):
        penalty.set_stage(end)
        grammar |= {example_rule(x, y) for x, y in examples[start:end]}
        start = end
        for step in range(cfg.max_num_steps):
            began = time.perf_counter()
            grammar, added, removed = _step(search, grammar)
            info = {"partition": part, "step": step, "rules": len(grammar), "added": added,
                    "removed": removed, "seconds": time.perf_counter() - began,
                    "partitions": cfg.num_partitions}
            result.steps.append(info)
            if progress is not None:
                progress(info)
            if not added and not removed:
                break
    if cfg.refine:
        def run_steps(g: set[Rule]) -> set[Rule]:
            for _ in range(cfg.max_num_steps):
                g, added, removed = _step(search, g)
                if not added and not removed:
                    break
            return g
        grammar = refine(search, grammar, examples, seed_set, run_steps, result.refinements.append)
    result.rules = sorted(grammar)
    return result


def _step(search: _Search, grammar: set[Rule]) -> tuple[set[Rule], int, int]:
    """One search step: every rule's action against the same snapshot, then their union.
    Returns the new grammar and the numbers of rules added and removed."""
    search.snapshot(grammar)
    add: set[Rule] = set()
    remove: set[Rule] = set()
    for rule in search.rules:
        a, r = search.select_action(rule)
        add |= a
        remove |= r
    return (grammar | add) - remove, len(add), len(remove)
