"""Synchronous chart parsing of a source with QCFG rules (CKY generalised to n-ary rules).

Items of a span carry their target string; with a gold target, items whose target is not
a substring of it are dropped after each cell (plain string containment on the
space-joined strings, as the reference does). An ``NT_i`` token in the input is a leaf:
any NT slot of a rule takes it, contributing the literal ``NT_i`` as that child's target.

Node keys are ``(start, end, target, rule_id)``; leaves have rule_id ``LEAF``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import product

import numpy as np

from compgen.augment.csl.rules import Rule, is_nt, nt_index

LEAF = -1
NodeKey = tuple[int, int, str, int]


@dataclass
class Chart:
    """cells[(i, j)]: node key -> alternatives (each a tuple of child keys, source order)."""

    tokens: tuple[str, ...]
    cells: dict[tuple[int, int], dict[NodeKey, list[tuple[NodeKey, ...]]]] = field(default_factory=dict)

    def top(self) -> dict[NodeKey, list[tuple[NodeKey, ...]]]:
        return self.cells.get((0, len(self.tokens)), {})

    def top_targets(self) -> set[str]:
        return {key[2] for key in self.top()}


def _template(rule: Rule):
    """Target as pieces: literal token strings and 0-based child indices."""
    return tuple(nt_index(t) - 1 if is_nt(t) else t for t in rule.target)


class RuleIndex:
    """Rules prepared for parsing: target templates, lookup by first source symbol."""

    def __init__(self, rules: Sequence[Rule]):
        self.rules = list(rules)
        self.templates = [_template(r) for r in self.rules]
        self.terminals = [r.terminals() for r in self.rules]
        self.unary = [i for i, r in enumerate(self.rules) if len(r.source) == 1 and r.arity == 1]
        self.by_terminal: dict[str, list[int]] = {}
        for i, terms in enumerate(self.terminals):
            for t in terms:
                self.by_terminal.setdefault(t, []).append(i)
        self.postings = {t: np.array(ids, dtype=np.int64) for t, ids in self.by_terminal.items()}
        self.n_terms = np.array([len(terms) for terms in self.terminals], dtype=np.int64)
        self.source_len = np.array([len(r.source) for r in self.rules], dtype=np.int64)
        self.is_unary = np.zeros(len(self.rules), dtype=bool)
        self.is_unary[self.unary] = True

    def usable(self, tokens: Sequence[str], exclude: int | None = None) -> list[int]:
        """Rules whose source terminals all occur in the input (no unary rules): posting
        hits counted per rule, compared with the rule's number of distinct terminals."""
        lists = [self.postings[t] for t in set(tokens) if t in self.postings]
        hits = (np.bincount(np.concatenate(lists), minlength=len(self.rules)) if lists
                else np.zeros(len(self.rules), dtype=np.int64))
        ok = (hits == self.n_terms) & (self.source_len <= len(tokens)) & ~self.is_unary
        if exclude is not None:
            ok[exclude] = False
        return np.flatnonzero(ok).tolist()

    def target(self, rule_id: int, children: Sequence[str]) -> str:
        return " ".join(children[p] if isinstance(p, int) else p for p in self.templates[rule_id]
                        if not (isinstance(p, int) and children[p] == ""))


def parse(tokens: Sequence[str], index: RuleIndex, keep: Callable[[str], bool] | None = None,
          max_unary: int = 0, exclude: int | None = None, record: bool = True,
          max_items: int | None = None) -> Chart:
    """Fill the chart of ``tokens``. ``keep(target)`` prunes items (None keeps all);
    ``exclude`` leaves one rule out (derivability of that rule); without ``record`` the
    alternatives are not stored and items of a cell are merged by target string."""
    tokens = tuple(tokens)
    n = len(tokens)
    chart = Chart(tokens)
    cells = chart.cells
    rules = index.rules
    usable = index.usable(tokens, exclude)
    first_terminal: dict[str, list[int]] = {}
    first_nt: list[int] = []
    for rid in usable:
        first = rules[rid].source[0]
        if is_nt(first):
            first_nt.append(rid)
        else:
            first_terminal.setdefault(first, []).append(rid)
    unary = [u for u in index.unary if u != exclude] if max_unary else []
    # child options per cell: (target, key) pairs
    options: dict[tuple[int, int], list[tuple[str, NodeKey]]] = {}

    def add(cell, key, alt):
        if key in cell:
            if record:
                cell[key].append(alt)
        else:
            cell[key] = [alt] if record else []

    def matches(src, pos, k, i, j):
        """Child spans for src[pos:] over tokens[k:j] (NT slots never cover all of i..j)."""
        if pos == len(src):
            if k == j:
                yield ()
            return
        remaining = len(src) - pos
        if j - k < remaining:
            return
        sym = src[pos]
        if not is_nt(sym):
            if tokens[k] == sym:
                yield from matches(src, pos + 1, k + 1, i, j)
            return
        for e in range(k + 1, j - remaining + 2):
            if (k, e) in options and not (k == i and e == j):
                for rest in matches(src, pos + 1, e, i, j):
                    yield ((k, e),) + rest

    for length in range(1, n + 1):
        for i in range(n - length + 1):
            j = i + length
            cell: dict = {}
            if length == 1 and is_nt(tokens[i]):
                cell[(i, j, tokens[i], LEAF)] = [()]
            for rid in first_terminal.get(tokens[i], []) + first_nt:
                src = rules[rid].source
                if len(src) > length or (not is_nt(src[-1]) and src[-1] != tokens[j - 1]):
                    continue
                for spans in matches(src, 0, i, i, j):
                    for combo in product(*(options[s] for s in spans)):
                        target = index.target(rid, [c[0] for c in combo])
                        if keep is not None and not keep(target):
                            continue
                        key = (i, j, target, rid if record else LEAF - 1)
                        add(cell, key, tuple(c[1] for c in combo))
            frontier = list(cell)
            for _ in range(max_unary if unary else 0):
                new = []
                for child in frontier:
                    for rid in unary:
                        target = index.target(rid, [child[2]])
                        if keep is not None and not keep(target):
                            continue
                        key = (i, j, target, rid if record else LEAF - 1)
                        if key not in cell:
                            new.append(key)
                        add(cell, key, (child,))
                frontier = new
                if not frontier:
                    break
            if max_items is not None and len(cell) > max_items:
                cell = dict(list(cell.items())[:max_items])
            if cell:
                cells[(i, j)] = cell
                if record:
                    options[(i, j)] = [(key[2], key) for key in cell]
                else:
                    options[(i, j)] = [(key[2], key) for key in cell]
    return chart


def derivable(rule: Rule, index: RuleIndex, rule_id: int | None = None, max_unary: int = 2) -> bool:
    """Can the other rules of ``index`` derive ``rule`` (its NTs taken as leaves)?"""
    target = " ".join(rule.target)
    chart = parse(rule.source, index, keep=target.__contains__, max_unary=max_unary,
                  exclude=rule_id, record=False)
    return target in chart.top_targets()
