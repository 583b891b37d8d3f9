"""Parse forests of training pairs as flat arrays, packed into batches for the inside
algorithm.

A forest has OR nodes (one per span, target string and rule: the rule's application
with every derivation of its children aggregated) and, per node, alternatives (one per
choice of child nodes). A child entry records which rule slot (the context) it fills.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compgen.augment.csl.chart import LEAF, RuleIndex, parse
from compgen.augment.csl.rules import Rule


def context_offsets(rules: Sequence[Rule]) -> np.ndarray:
    """Context index of slot 0 of each rule: 0 is the root context, then each rule's
    source NT slots in rule order."""
    arities = np.array([r.arity for r in rules], dtype=np.int64)
    return 1 + np.concatenate([[0], np.cumsum(arities)[:-1]]) if len(rules) else arities


@dataclass
class Forest:
    node_rule: np.ndarray    # [n] rule index (the model's lhs index)
    node_level: np.ndarray   # [n] 0 for arity-0 nodes, else 1 + max child level
    alt_node: np.ndarray     # [a] node of each alternative
    entry_alt: np.ndarray    # [e] alternative of each child entry
    entry_child: np.ndarray  # [e] child node
    entry_ctx: np.ndarray    # [e] context (parent rule slot) the child fills
    roots: np.ndarray        # [r] nodes spanning the input with the gold target

    @property
    def size(self) -> int:
        return int(self.node_rule.size)


def chart_to_forest(chart, root_keys, offsets: np.ndarray) -> Forest:
    """Keep the nodes reachable from ``root_keys``; number them children first."""
    alts_of: dict = {}
    for cell in chart.cells.values():
        alts_of.update(cell)
    order: list = []
    level: dict = {}
    state: dict = {}
    for root in root_keys:  # iterative DFS, post-order
        stack = [(root, False)]
        while stack:
            key, done = stack.pop()
            if done:
                lv = 0
                for alt in alts_of[key]:
                    for child in alt:
                        if child in level:
                            lv = max(lv, level[child] + 1)
                level[key] = lv
                order.append(key)
                continue
            if key in state:
                continue
            state[key] = 1
            stack.append((key, True))
            for alt in alts_of[key]:
                for child in alt:
                    if child not in state and child[3] != LEAF:
                        stack.append((child, False))
    number = {key: i for i, key in enumerate(order)}
    node_rule = np.array([key[3] for key in order], dtype=np.int64)
    alt_node, entry_alt, entry_child, entry_ctx = [], [], [], []
    for key in order:
        for alt in alts_of[key]:
            if any(child not in number for child in alt):
                continue  # a child on a cycle through unary rules (never complete)
            a = len(alt_node)
            alt_node.append(number[key])
            for slot, child in enumerate(alt):
                entry_alt.append(a)
                entry_child.append(number[child])
                entry_ctx.append(int(offsets[key[3]]) + slot)
    as_array = lambda xs: np.array(xs, dtype=np.int64)
    return Forest(node_rule, as_array([level[k] for k in order]), as_array(alt_node), as_array(entry_alt),
                  as_array(entry_child), as_array(entry_ctx), as_array([number[k] for k in root_keys]))


def build_forest(source: Sequence[str], target: Sequence[str], index: RuleIndex, offsets: np.ndarray,
                 max_unary: int = 0) -> Forest | None:
    """The forest of all derivations of (source, target), or None if there is none."""
    gold = " ".join(target)
    chart = parse(source, index, keep=gold.__contains__, max_unary=max_unary)
    roots = [key for key in chart.top() if key[2] == gold and key[3] != LEAF]
    if not roots:
        return None
    return chart_to_forest(chart, roots, offsets)


@dataclass
class PackedBatch:
    """Forests of a batch concatenated, with the work of each level grouped together."""

    node_rule: np.ndarray
    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]
    root_node: np.ndarray
    root_example: np.ndarray
    n_nodes: int
    n_examples: int


def pack(forests: Sequence[Forest]) -> PackedBatch:
    node_off = np.cumsum([0] + [f.size for f in forests])
    alt_off = np.cumsum([0] + [f.alt_node.size for f in forests])
    cat = np.concatenate
    node_rule = cat([f.node_rule for f in forests])
    node_level = cat([f.node_level for f in forests])
    alt_node = cat([f.alt_node + o for f, o in zip(forests, node_off)])
    entry_alt = cat([f.entry_alt + o for f, o in zip(forests, alt_off)])
    entry_child = cat([f.entry_child + o for f, o in zip(forests, node_off)])
    entry_ctx = cat([f.entry_ctx for f in forests])
    root_node = cat([f.roots + o for f, o in zip(forests, node_off)])
    root_example = cat([np.full(f.roots.size, i, dtype=np.int64) for i, f in enumerate(forests)])
    levels = []
    alt_level = node_level[alt_node]
    entry_level = alt_level[entry_alt]
    for lv in range(int(node_level.max()) + 1 if node_level.size else 0):
        nodes = np.flatnonzero(node_level == lv)
        local_node = np.full(node_rule.size, -1, dtype=np.int64)
        local_node[nodes] = np.arange(nodes.size)
        alts = np.flatnonzero(alt_level == lv)
        local_alt = np.full(alt_node.size, -1, dtype=np.int64)
        local_alt[alts] = np.arange(alts.size)
        entries = np.flatnonzero(entry_level == lv)
        levels.append((nodes, local_node[alt_node[alts]], local_alt[entry_alt[entries]],
                       entry_child[entries], entry_ctx[entries], node_rule[entry_child[entries]]))
    return PackedBatch(node_rule, levels, root_node, root_example, int(node_rule.size), len(forests))
