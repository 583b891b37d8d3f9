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
  sample); ``any_of``: tuples holding at least one of the rare tokens (user data);
* ``prototype_cut`` (SCAN and user data): an export stores one file of tuples per length
  cut of Omega's prototypes (``prototypes.txt`` for the preset's, ``prototypes.CUT.txt``
  for the others, listed in the manifest's ``decoding.prototype_cuts``); a job reads the
  file of its cut (``tuples_for_cut``);
* ``max_rows``: a deterministic strategy (greedy, beam: the exported graphs decode
  without dropout) decodes each selected tuple once; a second pass could only repeat
  candidates the uniqueness filter already holds.

The stored tuples are read once into one padded id array ``(tuples, K, width)``: a round's
batch is a fancy index into it, and a table of tuples x tokens answers ``cover`` with one
vectorised test, whatever the number of tuples.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from compgen.errors import SettingError, UserError, read_text
from compgen.runtimes.manifest import CUT_FILE, PROTOTYPE_FILE, Manifest, PrototypeCut

DETERMINISTIC = ("greedy", "beam")
PAD_ID = 0  # compgen.data.vocab.PAD_ID, without importing the vocabulary module's deps


def tuples_for_cut(manifest: Manifest, cut: str, drawn_with: str) -> Manifest:
    """The manifest as a job sampling with the ``cut`` length cut reads it: its decoding
    section names that cut's tuple file (``prototype_file``), how many tuples it holds
    and their width. ``drawn_with``: the cut of ``prototypes.txt`` in an export written
    before ``decoding.prototype_cuts`` (which then stores that cut alone)."""
    cuts = manifest.prototype_cuts or {drawn_with: PrototypeCut(
        PROTOTYPE_FILE, manifest.prototypes, manifest.prototype_width)}
    if cut not in cuts:
        raise SettingError(f"`prototype_cut` {cut}: this export stores prototype tuples drawn "
                           f"with the {' and '.join(sorted(cuts))} cut only; export it again "
                           "(compgen export FOLDER -o NEW: an export of a SCAN or user-data "
                           "generator stores every cut), or sample its checkpoint")
    chosen = cuts[cut]
    name = chosen.file
    if name != PROTOTYPE_FILE and not (CUT_FILE.fullmatch(name) and name in manifest.files):
        raise UserError(f"manifest.json: decoding.prototype_cuts.{cut}.file = {name!r}, "
                        "expected prototypes.CUT.txt listed in files")
    return manifest.for_cut(chosen)


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


def read_prototype_array(path: Path, nproto: int, width: int,
                         vocab_size: int | None = None) -> np.ndarray:
    """``prototypes.txt`` (or a cut's ``prototypes.CUT.txt``) as one ``(tuples, nproto,
    width)`` id array, ``PAD_ID`` after each prototype (``width``: the contract's prototype
    width; a longer prototype is an error; with ``vocab_size`` an id outside the vocabulary
    is one too, named by the file and line). Read once per file and content (cached by
    path, size and modification time)."""
    stat = Path(path).stat()
    return _read_prototype_array(str(path), nproto, width, vocab_size, stat.st_size,
                                 stat.st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _read_prototype_array(path: str, nproto: int, width: int, vocab_size: int | None,
                          size: int, mtime: int) -> np.ndarray:
    lines = read_text(Path(path)).splitlines()
    if not lines:
        raise UserError(f"{path}: no prototypes")
    fields = [line.split("\t") for line in lines]
    for lineno, row in enumerate(fields, 1):
        if len(row) != nproto:
            raise UserError(f"{path}:{lineno}: expected {nproto} prototypes per line")
    # one flat parse of every id, then scattered into place by each prototype's length
    texts = [f for row in fields for f in row]
    lengths = np.fromiter((f.count(" ") + 1 if f else 0 for f in texts), dtype=np.int64,
                          count=len(texts))
    try:
        flat = np.array(" ".join(texts).split(), dtype=np.int64)
    except ValueError:
        raise UserError(f"{path}: expected token ids (integers)") from None
    if len(flat) != lengths.sum() or (len(lengths) and lengths.max() > width):
        raise UserError(f"{path}: prototypes do not fit the contract's width {width}")
    if vocab_size is not None:
        outside = np.flatnonzero((flat < 0) | (flat >= vocab_size))
        if len(outside):   # the line of the first: the field holding that id, per nproto
            field = int(np.searchsorted(np.cumsum(lengths), outside[0], side="right"))
            raise UserError(f"{path}:{field // nproto + 1}: token id {flat[outside[0]]} outside "
                            f"the vocabulary (0 to {vocab_size - 1})")
    out = np.full((len(lines) * nproto, max(width, 1)), PAD_ID, dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    rows = np.repeat(np.arange(len(texts)), lengths)
    cols = np.arange(len(flat)) - np.repeat(starts, lengths)
    out[rows, cols] = flat
    out.setflags(write=False)
    return out.reshape(len(lines), nproto, max(width, 1))


def token_table(array: np.ndarray, vocab_size: int, source: str = "prototypes.txt") -> np.ndarray:
    """``(tuples, vocab_size)`` booleans: which token ids occur in each tuple's prototypes
    (``PAD_ID`` counts as occurring; it is never a word to cover)."""
    flat = array.reshape(len(array), -1)
    if flat.size and (flat.min() < 0 or flat.max() >= vocab_size):
        raise UserError(f"{source}: a token id outside the vocabulary")
    table = np.zeros((len(array), vocab_size), dtype=bool)
    table[np.arange(len(array))[:, None], flat] = True
    return table


def first_occurrences(array: np.ndarray) -> np.ndarray:
    """Indices of the tuples not seen earlier in the array, in order."""
    _, first = np.unique(array.reshape(len(array), -1), axis=0, return_index=True)
    return np.sort(first)


def select_tuples(array: np.ndarray | None, stored: int, vocab_index: dict,
                  cover: Sequence[str] = (), any_of: Sequence[str] = (),
                  source: str = "prototypes.txt") -> TupleSelection:
    """The stored tuples worth decoding: first occurrences; with ``cover`` only those
    whose prototypes contain every one of these words, with ``any_of`` those holding at
    least one. ``array``: ``read_prototype_array``'s, None for a generator without
    prototypes (its one empty tuple is every sample's)."""
    if array is None:
        if cover or any_of:
            raise SettingError("`rare_prototypes`: this generator decodes without prototypes")
        return TupleSelection(np.arange(max(stored, 1)), max(stored, 1))
    chosen = first_occurrences(array)
    words = list(cover) or list(any_of)
    if words:
        unknown = [w for w in words if w not in vocab_index]
        if cover and unknown:
            raise SettingError(f"`rare` {' '.join(cover)}: {' '.join(unknown)} is not in the "
                               "generator's vocabulary, so no prototype tuple contains it")
        table = token_table(array, len(vocab_index), source)
        wanted = [vocab_index[w] for w in words if w in vocab_index]
        hits = table[:, wanted]
        covered = hits.all(axis=1) if cover else hits.any(axis=1)
        chosen = chosen[covered[chosen]]
        if len(chosen) == 0:
            raise SettingError(f"`rare` {' '.join(words)}: no prototype tuple stored in "
                               f"{source} contains it ({len(array):,} tuples); sample with "
                               "`all_prototypes` or export with more `max_prototypes`")
    return TupleSelection(chosen, len(array))
