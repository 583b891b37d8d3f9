"""Which stored prototype tuples of an export are worth decoding, chosen before decoding.

An export stores its sampling-time prototype tuples (``prototypes.txt``, token ids) and
every backend cycles through them: sample ``i`` decodes tuple ``selected[i % len(selected)]``
with random draws keyed by ``i`` (the decoding contract). The filter's rules that can be
known before decoding are applied here, to the tuples, so no round spends time on rows
the filter would throw away:

* duplicate tuples are dropped (first occurrence kept): a deterministic graph would only
  decode the same candidate again;
* ``cover`` (``--rare-prototypes``): only tuples whose prototypes contain every word of the
  rare phrase between them; with a copying generator these are the tuples that yield the
  rare word (on SCAN jump 6.6 % of the stored tuples, which gave nearly every accepted
  sample);
* ``max_rows``: a deterministic strategy (greedy, beam: the exported graphs decode
  without dropout) decodes each selected tuple once; a second pass could only repeat
  candidates the uniqueness filter already holds.

A table of tuples x tokens (one boolean row per tuple) answers ``cover`` with one
vectorised test, whatever the number of tuples.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compgen.errors import UserError

DETERMINISTIC = ("greedy", "beam")


class TupleSelection:
    """The stored tuples chosen for a sampling job, as a cycle of indices."""

    def __init__(self, selected: np.ndarray, stored: int):
        self.selected = np.asarray(selected, dtype=np.int64)
        self.stored = stored

    def __len__(self) -> int:
        return len(self.selected)

    def indices(self, first: int, k: int) -> np.ndarray:
        """The stored-tuple indices of samples ``first .. first + k - 1``."""
        return self.selected[(first + np.arange(k)) % max(len(self.selected), 1)]

    def max_rows(self, strategy: str, raise_temperature: bool) -> int | None:
        """Rows worth decoding at most: one pass when every row of a pass is decoded
        deterministically, else no bound (random draws keyed by the sample index differ
        in every pass)."""
        if strategy in DETERMINISTIC and not raise_temperature:
            return len(self.selected)
        return None

    @property
    def description(self) -> str:
        if len(self.selected) == self.stored:
            return f"{self.stored:,} prototype tuples"
        return f"{len(self.selected):,} of {self.stored:,} prototype tuples"


def token_table(tuples: Sequence[Sequence[Sequence[int]]], vocab_size: int) -> np.ndarray:
    """``(tuples, vocab_size)`` booleans: which token ids occur in each tuple's prototypes."""
    rows = np.repeat(np.arange(len(tuples)), [sum(len(p) for p in tup) for tup in tuples])
    ids = np.fromiter((t for tup in tuples for p in tup for t in p), dtype=np.int64,
                      count=len(rows))
    if len(ids) and (ids.min() < 0 or ids.max() >= vocab_size):
        raise UserError("prototypes.txt: a token id outside the vocabulary")
    table = np.zeros((len(tuples), vocab_size), dtype=bool)
    table[rows, ids] = True
    return table


def first_occurrences(tuples: Sequence[Sequence[Sequence[int]]]) -> np.ndarray:
    """Indices of the tuples not seen earlier in the list, in order."""
    seen: set = set()
    keep = []
    for i, tup in enumerate(tuples):
        key = tuple(tuple(p) for p in tup)
        if key not in seen:
            seen.add(key)
            keep.append(i)
    return np.asarray(keep, dtype=np.int64)


def select_tuples(tuples: Sequence[Sequence[Sequence[int]]], stored: int, vocab_index: dict,
                  cover: Sequence[str] = (), source: str = "prototypes.txt") -> TupleSelection:
    """The stored tuples worth decoding: first occurrences, and with ``cover`` only those
    whose prototypes contain every one of these words. ``stored``: the contract's count
    (a generator without prototypes has none: its one empty tuple is every sample's)."""
    if not tuples:
        if cover:
            raise UserError("--rare-prototypes: this generator decodes without prototypes")
        return TupleSelection(np.arange(max(stored, 1)), max(stored, 1))
    chosen = first_occurrences(tuples)
    if cover:
        unknown = [w for w in cover if w not in vocab_index]
        if unknown:
            raise UserError(f"--rare {' '.join(cover)}: {' '.join(unknown)} is not in the "
                            "generator's vocabulary, so no prototype tuple contains it")
        table = token_table(tuples, len(vocab_index))
        wanted = [vocab_index[w] for w in cover]
        covered = np.nonzero(table[:, wanted].all(axis=1))[0]
        chosen = chosen[np.isin(chosen, covered)]
        if len(chosen) == 0:
            raise UserError(f"--rare {' '.join(cover)}: no prototype tuple stored in "
                            f"{source} contains it ({len(tuples):,} tuples); sample with "
                            "--all-prototypes or export with more --prototypes")
    return TupleSelection(chosen, len(tuples))
