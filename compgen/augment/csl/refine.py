"""Refinement after the induction search (the project's extension; the reference stops
at the search's fixed point).

The search chooses every action of a step against one snapshot of the grammar and never
drops a rule that is not itself derivable, so it can stop in a local optimum: on
scan/simple it keeps `NT_1 after turn ### NT_1` (needed by no training pair once other
actions of its step added `turn left`) and `turn around ### I_TURN_LEFT ×3` in place of
`turn around left` (docs/results.md). Refinement tries, for each rule r but the seeds,
most costly first:

* drop r, if every training pair whose source has r's terminals is still derivable;
* else replace r: drop it, add the example rules of the (SHORTEST) shortest pairs it no
  longer derives, run search steps to their fixed point, and keep the result if it
  derives every pair whose source has r's terminals.

A move is kept only if it lowers the objective L(G) (size + penalty of every rule), so
refinement ends; passes repeat until one keeps no move.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from itertools import islice

from compgen.augment.csl.chart import RuleIndex, parse
from compgen.augment.csl.rules import Rule, example_rule

SHORTEST = 16  # example rules a replacement starts from
Pair = tuple[tuple[str, ...], tuple[str, ...]]


def objective(search, grammar: set[Rule]) -> float:
    """L(G): the summed size and penalty of the rules (the search's own terms)."""
    return sum(search.size(r) + search.penalty(r) for r in grammar)


def underived(grammar: set[Rule], pairs: Sequence[Pair]) -> Iterator[Pair]:
    """The pairs whose target is not among the parses of their source, lazily."""
    index = RuleIndex(sorted(grammar))
    for x, y in pairs:
        gold = " ".join(y)
        if gold not in parse(x, index, keep=gold.__contains__, record=False).top_targets():
            yield x, y


def refine(search, grammar: set[Rule], examples: Sequence[Pair], seeds: set[Rule],
           run_steps: Callable[[set[Rule]], set[Rule]],
           log: Callable[[dict], None] | None = None) -> set[Rule]:
    """``grammar`` after refinement moves (module docstring). ``examples``: the training
    pairs, shortest source first; ``search`` gives sizes and penalties (its penalty stage
    at every example); ``run_steps`` runs search steps on a grammar to their fixed point;
    ``log`` gets one dict per kept move."""
    terms = [set(x) for x, _ in examples]
    changed = True
    while changed:
        changed = False
        for rule in sorted(grammar - seeds, key=lambda r: (-search.size(r) - search.penalty(r), r)):
            if rule not in grammar:
                continue
            needed = set(rule.terminals())
            affected = [ex for ex, t in zip(examples, terms) if needed <= t]
            trial = grammar - {rule}
            # the shortest pairs lost (a drop is checked on all of them)
            lost = list(islice(underived(trial, affected), SHORTEST))
            if lost:
                trial = run_steps(trial | {example_rule(x, y) for x, y in lost})
            before, after = objective(search, grammar), objective(search, trial)
            if after < before and not (lost and next(underived(trial, affected), None)):
                if log is not None:
                    log({"dropped": sorted(map(str, grammar - trial)),
                         "added": sorted(map(str, trial - grammar)), "objective": (before, after)})
                grammar, changed = trial, True
    return grammar
