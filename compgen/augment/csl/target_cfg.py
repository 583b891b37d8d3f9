"""Target CFGs: which rule targets are well formed (COGS: variable-free logical forms).

File format: one rule a line, ``LHS => sym sym ...``; ``#`` lines and blank lines are
skipped; in the right-hand side ``##NAME`` is a nonterminal, anything else a terminal;
the start symbol is ``ROOT``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from compgen.augment.csl.rules import is_nt
from compgen.errors import UserError, read_text, where
from compgen.io import atomic_open

ARROW = "=>"
NT_MARK = "##"
PLACEHOLDER = "##PLACEHOLDER"


def rhs_matches(rhs: Sequence[str], tokens: Sequence[str], i: int, j: int, children,
                combine, start):
    """The ways the right-hand side ``rhs`` derives ``tokens[i:j]`` from spans parsed
    already (a chart parser over rules of any arity): a terminal must equal its token, a
    nonterminal ``##C`` covers a sub-span ``(k, e)`` for each value ``children(k, e, C)``
    yields, joined with what the rule matched so far by ``combine`` (None: the two do
    not fit together). Yields the joined value of each way, from ``start``; the span
    ``(i, j)`` itself is never its own child (no unary loop)."""
    def walk(pos: int, k: int, matched):
        if pos == len(rhs):
            if k == j:
                yield matched
            return
        if j - k < len(rhs) - pos:
            return
        symbol = rhs[pos]
        if not symbol.startswith(NT_MARK):
            if tokens[k] == symbol:
                yield from walk(pos + 1, k + 1, matched)
            return
        for e in range(k + 1, j - (len(rhs) - pos - 1) + 1):
            if (k, e) == (i, j):
                continue
            for child in children(k, e, symbol[len(NT_MARK):]):
                joined = combine(matched, child)
                if joined is not None:
                    yield from walk(pos + 1, e, joined)

    return walk(0, i, start)


def _keep(matched, child):
    return matched


@dataclass(frozen=True)
class CfgRule:
    lhs: str
    rhs: tuple[str, ...]  # nonterminals keep their ## prefix

    def __str__(self) -> str:
        return f"{self.lhs} {ARROW} {' '.join(self.rhs)}"


def read_target_cfg(path: str | Path) -> list[CfgRule]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such target grammar file")
    rules = []
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        parts = text.split()
        if parts.count(ARROW) != 1 or parts[1:2] != [ARROW] or len(parts) < 3:
            raise UserError(f"{where(path, lineno)}: expected 'LHS {ARROW} symbol ...' (got {text!r})")
        rules.append(CfgRule(parts[0], tuple(parts[2:])))
    lhs = {r.lhs for r in rules}
    if "ROOT" not in lhs:
        raise UserError(f"{path}: no rule for the start symbol ROOT")
    for r in rules:
        for sym in r.rhs:
            if sym.startswith(NT_MARK) and sym[2:] not in lhs:
                raise UserError(f"{path}: {sym} is used but has no rule")
    return rules


def write_target_cfg(path: str | Path, rules: Iterable[CfgRule], header: str | None = None) -> None:
    with atomic_open(path) as handle:
        if header:
            handle.writelines(f"# {line}\n" for line in header.splitlines())
        handle.writelines(f"{r}\n" for r in rules)


STRUCTURE = {"(", ")", ",", "=", "*", ".", "agent", "theme", "recipient", "ccomp", "xcomp", "nmod",
             "in", "on", "beside"}


def cogs_target_cfg(targets: Iterable[Sequence[str]]) -> list[CfgRule]:
    """The COGS grammar of variable-free targets; NAME covers every other target token."""
    names = sorted({t for target in targets for t in target if t not in STRUCTURE and not is_nt(t)})
    spec = ["ROOT => ##FUNC", "FUNC => ##LABEL", "FUNC => ##LABEL ( ##ARGS )", "LABEL => ##NAME",
            "LABEL => * ##NAME", "ARGS => ##ARG", "ARGS => ##ARG , ##ARGS", "ARG => ##KEY = ##FUNC",
            "KEY => agent", "KEY => theme", "KEY => recipient", "KEY => ccomp", "KEY => xcomp",
            "KEY => nmod . ##PREP", "PREP => in", "PREP => on", "PREP => beside"]
    rules = [CfgRule(line.split()[0], tuple(line.split()[2:])) for line in spec]
    return rules + [CfgRule("NAME", (w,)) for w in names]


class TargetChecker:
    """Can a rule target be derived from some category of the target CFG, reading each
    QCFG NT token as a placeholder any category derives? (Repeated NT indices need not
    agree; unary rules apply up to ``max_unary`` times per span.)"""

    def __init__(self, rules: Sequence[CfgRule], max_unary: int = 2):
        self.rules = list(rules)
        self.max_unary = max_unary
        self.terminals = {s for r in self.rules for s in r.rhs if not s.startswith(NT_MARK)}
        self.categories = sorted({r.lhs for r in self.rules})
        # rules "C => word" form a lexicon looked up per token; the few others are matched
        self.lexicon: dict[str, set[str]] = {}
        self.structural = []
        for r in self.rules:
            if len(r.rhs) == 1 and not r.rhs[0].startswith(NT_MARK):
                self.lexicon.setdefault(r.rhs[0], set()).add(r.lhs)
            else:
                self.structural.append(r)
        self._cache: dict[tuple[str, ...], bool] = {}

    def can_parse(self, target: Sequence[str]) -> bool:
        target = tuple(target)
        hit = self._cache.get(target)
        if hit is None:
            hit = self._cache[target] = self._parse(target)
        return hit

    def _parse(self, tokens: tuple[str, ...]) -> bool:
        return bool(self.spanning_categories(tokens))

    def spanning_categories(self, tokens: Sequence[str]) -> set[str]:
        """The categories that derive the whole of ``tokens`` (empty: no parse)."""
        tokens = tuple(tokens)
        if not tokens or any(not is_nt(t) and t not in self.terminals for t in tokens):
            return set()
        present = set(tokens)
        usable = [r for r in self.structural
                  if all(s.startswith(NT_MARK) or s in present for s in r.rhs)]
        unary = [r for r in usable if len(r.rhs) == 1 and r.rhs[0].startswith(NT_MARK)]
        branching = [r for r in usable if r not in unary]
        n = len(tokens)
        cells: dict[tuple[int, int], set[str]] = {}

        def parsed_as(k: int, e: int, category: str):
            return (True,) if category in cells.get((k, e), ()) else ()

        for length in range(1, n + 1):
            for i in range(n - length + 1):
                j = i + length
                cell: set[str] = set()
                if length == 1:
                    if is_nt(tokens[i]):
                        cell.update(self.categories)  # C -> PLACEHOLDER for every category
                    else:
                        cell.update(self.lexicon.get(tokens[i], ()))
                for r in branching:
                    if r.lhs not in cell and len(r.rhs) <= length and any(
                            rhs_matches(r.rhs, tokens, i, j, parsed_as, _keep, True)):
                        cell.add(r.lhs)
                for _ in range(self.max_unary):
                    new = {r.lhs for r in unary if r.rhs[0][2:] in cell and r.lhs not in cell}
                    if not new:
                        break
                    cell |= new
                if cell:
                    cells[(i, j)] = cell
        return cells.get((0, n), set())
