"""QCFG rules ``NT -> <source, target>`` and the grammar text format ``source ### target``.

One nonterminal symbol; its occurrences are the tokens ``NT_1``, ``NT_2``, ... The source
uses each index once, in increasing order of first occurrence (canonical form); the
target uses the same set of indices, possibly repeated (``NT_1 twice ### NT_1 NT_1``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from compgen.errors import UserError, read_text, where
from compgen.io import atomic_open

SEPARATOR = "###"
NT_PREFIX = "NT_"


def is_nt(token: str) -> bool:
    return token.startswith(NT_PREFIX) and token[3:].isdigit() and token[3:] != "0"


def nt_index(token: str) -> int:
    return int(token[3:])


def nt_token(index: int) -> str:
    return f"{NT_PREFIX}{index}"


@dataclass(frozen=True, order=True)
class Rule:
    """An immutable rule; ordered as the tuple (source, target, arity), the order that
    assigns the model's rule indices."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    arity: int

    def __str__(self) -> str:
        return f"{' '.join(self.source)} {SEPARATOR} {' '.join(self.target)}"

    def size(self, nt_coef: float, terminal_coef: float) -> float:
        return sum(nt_coef if is_nt(t) else terminal_coef for t in self.source + self.target)

    def apply(self, child_targets: Sequence[Sequence[str]]) -> tuple[str, ...]:
        """The target with each ``NT_i`` replaced by the i-th child's target tokens."""
        out: list[str] = []
        for token in self.target:
            if is_nt(token):
                out.extend(child_targets[nt_index(token) - 1])
            else:
                out.append(token)
        return tuple(out)

    def terminals(self) -> frozenset[str]:
        return frozenset(t for t in self.source if not is_nt(t))


def nt_set(tokens: Iterable[str]) -> set[str]:
    return {t for t in tokens if is_nt(t)}


def canonical(source: Sequence[str], target: Sequence[str]) -> Rule:
    """Renumber the source NTs 1..k left to right and rename the target alike."""
    renaming: dict[str, str] = {}
    for token in source:
        if is_nt(token) and token not in renaming:
            renaming[token] = nt_token(len(renaming) + 1)
    new_source = tuple(renaming.get(t, t) for t in source)
    new_target = tuple(renaming.get(t, t) if is_nt(t) else t for t in target)
    return Rule(new_source, new_target, len(renaming))


def example_rule(source: Sequence[str], target: Sequence[str]) -> Rule:
    return Rule(tuple(source), tuple(target), 0)


def parse_rule(line: str, source_name: str = "<rule>", lineno: int | None = None) -> Rule:
    """Parse ``source ### target``; a malformed rule is a UserError naming file and line."""
    loc = where(source_name, lineno)
    padded = f" {line.strip()} "
    if padded.count(f" {SEPARATOR} ") != 1:
        raise UserError(f"{loc}: expected 'source {SEPARATOR} target' with one '{SEPARATOR}' "
                        f"(got {line.strip()!r})")
    left, right = padded.split(f" {SEPARATOR} ")
    source, target = tuple(left.split()), tuple(right.split())
    if not source or not target:
        raise UserError(f"{loc}: both sides of '{SEPARATOR}' need at least one token")
    for token in source + target:
        if token.startswith(NT_PREFIX) and not is_nt(token):
            raise UserError(f"{loc}: unknown nonterminal {token!r} (use NT_1, NT_2, ...)")
    src_nts = [nt_index(t) for t in source if is_nt(t)]
    if len(set(src_nts)) != len(src_nts):
        raise UserError(f"{loc}: a nonterminal index repeats in the source")
    if sorted(src_nts) != list(range(1, len(src_nts) + 1)):
        raise UserError(f"{loc}: source nonterminals must be NT_1..NT_{len(src_nts)} "
                        f"(got {', '.join(nt_token(i) for i in src_nts)})")
    tgt_nts = {nt_index(t) for t in target if is_nt(t)}
    if tgt_nts != set(src_nts):
        extra = sorted(tgt_nts - set(src_nts))
        missing = sorted(set(src_nts) - tgt_nts)
        what = (f"target uses {', '.join(map(nt_token, extra))} not in the source" if extra
                else f"source nonterminal {', '.join(map(nt_token, missing))} unused in the target")
        raise UserError(f"{loc}: unbalanced nonterminals: {what}")
    return canonical(source, target)


def read_grammar(path: str | Path) -> list[Rule]:
    """Read a grammar file: one rule a line; blank lines and ``#`` comment lines skipped
    (a line starting with ``###`` is a rule with an empty source, an error)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such grammar file")
    rules: list[Rule] = []
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
        stripped = line.strip()
        if not stripped or (stripped.startswith("#") and not stripped.startswith(SEPARATOR)):
            continue
        rules.append(parse_rule(line, str(path), lineno))
    if not rules:
        raise UserError(f"{path}: no rules in grammar file")
    return sorted(set(rules))


def write_grammar(path: str | Path, rules: Iterable[Rule], header: str | None = None) -> None:
    with atomic_open(path) as handle:
        if header:
            handle.writelines(f"# {line}\n" for line in header.splitlines())
        handle.writelines(f"{rule}\n" for rule in sorted(rules))
