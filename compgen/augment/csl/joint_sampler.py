"""Sampling constrained by a target CFG (COGS): every rule's target is parsed once with
its NTs as placeholders; the categories a parse gives the whole target and each NT decide
which rules may expand which slot, so every sampled target is derivable from ROOT."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from compgen.augment.csl.forest import context_offsets
from compgen.augment.csl.rules import Rule, is_nt, nt_index
from compgen.augment.csl.sampler import SamplerConfig, draw_samples
from compgen.augment.csl.target_cfg import NT_MARK, CfgRule, rhs_matches
from compgen.errors import UserError

Signature = tuple[str, ...]  # (category of the whole target, category of NT_1, ..., NT_k)


def rule_signatures(rule: Rule, cfg_rules: Sequence[CfgRule], max_unary: int = 1) -> set[Signature]:
    """Every (root category, NT categories) under which the rule's target parses; all
    occurrences of one NT index must take the same category."""
    tokens = rule.target
    categories = sorted({r.lhs for r in cfg_rules})
    lexicon: dict[str, set[str]] = {}
    structural, unary = [], []
    for r in cfg_rules:
        if len(r.rhs) == 1 and not r.rhs[0].startswith(NT_MARK):
            lexicon.setdefault(r.rhs[0], set()).add(r.lhs)
        elif len(r.rhs) == 1:
            unary.append(r)
        elif all(s.startswith(NT_MARK) or s in tokens for s in r.rhs):
            structural.append(r)
    n = len(tokens)
    cells: dict[tuple[int, int], set[tuple[str, frozenset]]] = {}

    def merge(a: frozenset, b: frozenset):
        bound = dict(a)
        for nt, cat in b:
            if bound.setdefault(nt, cat) != cat:
                return None
        return frozenset(bound.items())

    def bindings_as(k: int, e: int, category: str):
        return (binding for cat, binding in cells.get((k, e), ()) if cat == category)

    for length in range(1, n + 1):
        for i in range(n - length + 1):
            j = i + length
            cell: set[tuple[str, frozenset]] = set()
            if length == 1:
                if is_nt(tokens[i]):
                    cell.update((c, frozenset({(tokens[i], c)})) for c in categories)
                else:
                    cell.update((c, frozenset()) for c in lexicon.get(tokens[i], ()))
            for r in structural:
                if len(r.rhs) <= length:
                    cell.update((r.lhs, b) for b in rhs_matches(r.rhs, tokens, i, j, bindings_as,
                                                                 merge, frozenset()))
            frontier = set(cell)
            for _ in range(max_unary):
                new = {(r.lhs, b) for r in unary for cat, b in frontier if r.rhs[0][2:] == cat} - cell
                if not new:
                    break
                cell |= new
                frontier = new
            if cell:
                cells[(i, j)] = cell
    out = set()
    for cat, binding in cells.get((0, n), ()):
        bound = dict(binding)
        if len(bound) == rule.arity:
            out.add((cat,) + tuple(bound[f"NT_{k}"] for k in range(1, rule.arity + 1)))
    return out


class JointSampler:
    """QCFG sampling whose expansions keep the target derivable from ROOT of the CFG."""

    def __init__(self, rules: Sequence[Rule], weights: np.ndarray, cfg: SamplerConfig,
                 cfg_rules: Sequence[CfgRule], max_unary: int = 1):
        cfg.validate()
        self.rules = sorted(rules)
        self.weights = weights
        self.cfg = cfg
        self.offsets = context_offsets(self.rules)
        self.signatures = [rule_signatures(r, cfg_rules, max_unary) for r in self.rules]
        self.dropped = sum(1 for s in self.signatures if not s)
        self.templates = [tuple(nt_index(t) - 1 if is_nt(t) else t for t in side)
                          for r in self.rules for side in (r.source, r.target)]
        self.rng = random.Random(cfg.seed)
        self._by_allowed: dict[frozenset[str], tuple[list[int], list[int], list[int]]] = {}
        self._cumulative: dict[tuple[int, int, frozenset[str]], np.ndarray] = {}
        if not any(sig[0] == "ROOT" for sigs in self.signatures for sig in sigs):
            raise UserError("no rule's target can be a ROOT of the target CFG")

    def _candidates(self, allowed: frozenset[str]) -> tuple[list[int], list[int], list[int]]:
        """(any, terminal, NT) rule ids with a signature rooted in ``allowed``; a handful of
        distinct sets occur, so each is worked out once rather than at every expansion."""
        found = self._by_allowed.get(allowed)
        if found is None:
            ids = [i for i, sigs in enumerate(self.signatures) if any(s[0] in allowed for s in sigs)]
            found = self._by_allowed[allowed] = (ids, [i for i in ids if self.rules[i].arity == 0],
                                                 [i for i in ids if self.rules[i].arity > 0])
        return found

    def _draw(self, ctx: int, depth: int, allowed: frozenset[str]) -> int | None:
        candidates = self._candidates(allowed)
        mode = 0
        if depth >= self.cfg.max_recursions and candidates[1]:
            mode = 1
        elif depth < self.cfg.min_recursions and candidates[2]:
            mode = 2
        ids = candidates[mode]
        if not ids:
            return None
        key = (ctx, mode, allowed)
        cum = self._cumulative.get(key)
        if cum is None:
            cum = self._cumulative[key] = np.cumsum(self.weights[ctx, ids])
        if cum[-1] <= 0:
            return None
        return ids[int(np.searchsorted(cum, self.rng.random() * cum[-1], side="right"))]

    def _expand(self, ctx: int, depth: int, allowed: frozenset[str]):
        if depth > self.cfg.max_recursions + 5:
            raise _TooDeep
        rid = self._draw(ctx, depth, allowed)
        if rid is None:
            raise _TooDeep
        sigs = [s for s in self.signatures[rid] if s[0] in allowed]
        children = [self._expand(int(self.offsets[rid]) + k, depth + 1, frozenset(s[k + 1] for s in sigs))
                    for k in range(self.rules[rid].arity)]
        out = []
        for side, template in enumerate(self.templates[2 * rid: 2 * rid + 2]):
            tokens: list[str] = []
            for piece in template:
                tokens.extend(children[piece][side] if isinstance(piece, int) else [piece])
            out.append(tokens)
        return out[0], out[1]

    def sample(self, max_tries: int = 1000) -> tuple[list[str], list[str]]:
        for _ in range(max_tries):
            try:
                return self._expand(0, 0, frozenset({"ROOT"}))
            except _TooDeep:
                continue
        raise UserError(f"no sample within the depth limit after {max_tries} tries")

    def samples(self, n: int, dedup: bool = False,
                progress: Callable[[int], None] | None = None,
                exclude: Iterable[tuple[Sequence[str], Sequence[str]]] = ()) -> list[tuple[list[str], list[str]]]:
        return draw_samples(self.sample, n, dedup, progress, exclude)


class _TooDeep(Exception):
    pass
