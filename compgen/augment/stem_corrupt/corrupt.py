"""STEM-CORRUPT (Anastasopoulos & Neubig 2019, as used by Samir & Silfverberg 2023).

The stem of an aligned (lemma, form) pair is the union of the runs of >= 3 identical,
non-epsilon aligned characters -- grapheme clusters, so a base letter and its combining
marks are one character, and never a space or a format character. Each stem character is
replaced, with probability ``theta``, by a character drawn uniformly from the training
alphabet -- the same character in the lemma and in the form, so the pair stays a consistent
inflection; affixes, spaces and tags are the gold pair's. Runs longer than 5 keep their first and last character.
A pool is built by re-aligning the training file and corrupting every pair that has a
stem, round after round, until it holds ``pool_size`` rows.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from compgen.augment.stem_corrupt.aligner import AlignerConfig, CrpAligner
from compgen.augment.stem_corrupt.graphemes import graphemes, is_letter_cluster
from compgen.configs.defaults import defaults_from
from compgen.configs.stem_corrupt_run import STEM_CORRUPT_PRESET
from compgen.data.sigmorphon import available_languages, parse_sigmorphon
from compgen.data.sources import resolve_data_dir
from compgen.errors import SettingError, UserError, not_a_file, read_text
from compgen.io import atomic_open

Triple = tuple[str, str, str]   # lemma, form, tags ("TAG;TAG;...")
EPSILON_CLUSTER = ""            # an aligned position with nothing on that side


@dataclass(frozen=True)
@defaults_from(STEM_CORRUPT_PRESET, "corrupt")
class StemCorruptConfig:
    pool_size: int
    theta: float        # probability of replacing one stem character
    min_run: int        # shorter identical runs are not stem
    protect_over: int   # runs longer than this keep their first and last character
    seed: int
    aligner: AlignerConfig = field(default_factory=AlignerConfig)

    def validate(self) -> None:
        if self.pool_size < 1:
            raise SettingError(f"`pool_size` must be >= 1 (got {self.pool_size})")
        if not 0.0 <= self.theta <= 1.0:
            raise UserError(f"theta must be in [0, 1] (got {self.theta})")
        if self.min_run < 1:
            raise UserError(f"min_run must be >= 1 (got {self.min_run})")
        self.aligner.validate()


Aligned = str | Sequence[str]   # aligned string (epsilon ' ') or clusters (epsilon "")


def _clusters(lemma_aligned: str | Sequence[str], form_aligned: str | Sequence[str]
              ) -> tuple[list[str], list[str]]:
    """Aligned grapheme clusters, ``""`` for epsilon. Aligned strings (one character per
    position, ``' '`` for epsilon) are read as the aligner renders them: a space aligned to
    a space is a genuine shared space, any other blank is epsilon."""
    if not isinstance(lemma_aligned, str):
        return list(lemma_aligned), list(form_aligned)
    a, b = [], []
    for c, d in zip(lemma_aligned, form_aligned, strict=True):
        shared = c == " " and d == " "
        a.append(c if shared or not c.isspace() else EPSILON_CLUSTER)
        b.append(d if shared or not d.isspace() else EPSILON_CLUSTER)
    return a, b


def _stem_character(a: str, b: str) -> bool:
    # spaces and format characters are never stem: they are kept as the gold words have them
    return a == b and a != EPSILON_CLUSTER and is_letter_cluster(a)


def stem_mask(lemma_aligned: Aligned, form_aligned: Aligned) -> list[bool]:
    """Positions where the aligned clusters are identical letters (not epsilon, not a space);
    if there is none, the alignment is assumed off by one and the form side is shifted right
    by one (the reference's retry)."""
    a, b = _clusters(lemma_aligned, form_aligned)
    mask = [_stem_character(x, y) for x, y in zip(a, b, strict=True)]
    if not any(mask):
        shifted = [EPSILON_CLUSTER, *b]
        mask = [_stem_character(x, shifted[i]) for i, x in enumerate(a)]
    return mask


def stem_ranges(lemma_aligned: Aligned, form_aligned: Aligned,
                min_run: int = 3) -> list[tuple[int, int]]:
    """Half-open [start, end) runs of the stem mask of length >= ``min_run``."""
    ranges, start = [], None
    mask = stem_mask(lemma_aligned, form_aligned) + [False]
    for i, on in enumerate(mask):
        if on and start is None:
            start = i
        elif not on and start is not None:
            if i - start >= min_run:
                ranges.append((start, i))
            start = None
    return ranges


def stem_of(lemma: str, form: str, aligner: CrpAligner | None = None) -> list[str]:
    """The stem runs (as strings of the lemma) of one pair aligned on its own."""
    aligner = aligner or CrpAligner()
    a, b = aligner.align_clusters([(lemma, form)])[0]
    return ["".join(a[s:e]) for s, e in stem_ranges(a, b)]


def corrupt_pair(lemma_aligned: Aligned, form_aligned: Aligned, alphabet: list[str],
                 rng: random.Random, config: StemCorruptConfig = StemCorruptConfig()
                 ) -> tuple[str, str] | None:
    """One synthetic (lemma, form) from an aligned pair, or None if it has no stem. Only
    stem clusters change; every other cluster, spaces included, is the gold word's."""
    a, b = _clusters(lemma_aligned, form_aligned)
    ranges = stem_ranges(a, b, config.min_run)
    if not ranges:
        return None
    for s, e in ranges:
        if e - s > config.protect_over:
            s, e = s + 1, e - 1
        for j in range(s, e):
            if rng.random() > 1.0 - config.theta:   # theta 0.5: the reference's random() > 0.5
                a[j] = b[j] = alphabet[rng.randrange(len(alphabet))]
    return "".join(a), "".join(b)


def training_alphabet(triples: list[Triple]) -> list[str]:
    """The grapheme clusters of the training lemmas and forms that can stand in a word on
    their own (sorted): no spaces, no format characters such as bidi controls or a
    byte-order mark, no combining mark without its base."""
    return sorted({c for lemma, form, _ in triples for c in graphemes(lemma) + graphemes(form)
                   if is_letter_cluster(c)})


def stem_corrupt_pool(triples: list[Triple], config: StemCorruptConfig = StemCorruptConfig(),
                      progress: Callable[[int], None] | None = None) -> list[Triple]:
    """``config.pool_size`` synthetic triples: re-align all pairs each round and corrupt
    every pair with a stem, in file order; no deduplication (a copy of a gold triple
    can occur)."""
    config.validate()
    if not triples:
        raise UserError("STEM-CORRUPT needs at least one training triple")
    alphabet = training_alphabet(triples)
    if not alphabet:
        raise UserError("STEM-CORRUPT: the training lemmas and forms have no characters")
    aligner = CrpAligner(config.aligner, seed=config.seed)
    rng = random.Random(config.seed)
    pairs = [(lemma, form) for lemma, form, _ in triples]
    pool: list[Triple] = []
    while len(pool) < config.pool_size:
        made = 0
        for (lemma_aligned, form_aligned), (_, _, tags) in zip(aligner.align_clusters(pairs),
                                                               triples, strict=True):
            new = corrupt_pair(lemma_aligned, form_aligned, alphabet, rng, config)
            if new is not None:
                pool.append((new[0], new[1], tags))
                made += 1
        if made == 0:
            raise UserError("STEM-CORRUPT: no training pair has a stem (an identical aligned "
                            f"run of >= {config.min_run} characters); no pool can be made")
        if progress is not None:
            progress(min(len(pool), config.pool_size))
    return pool[:config.pool_size]


def read_triples(path: str | Path) -> list[Triple]:
    """SIGMORPHON lines ``lemma<TAB>form<TAB>TAGS`` as (lemma, form, tags) strings."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: {not_a_file(path)}")
    rows = parse_sigmorphon(read_text(path), str(path))
    return [(lemma, form, ";".join(tags)) for lemma, form, tags in rows]


def write_triples(path: str | Path, triples: list[Triple]) -> int:
    with atomic_open(path, "w", encoding="utf-8") as out:
        for lemma, form, tags in triples:
            out.write(f"{lemma}\t{form}\t{tags}\n")
    return len(triples)


def language_file(lang: str, split: str, data_dir: Path) -> Path:
    """``<data>/sigmorphon2018/<lang>-<split>``; an unknown language is a user error."""
    path = Path(data_dir) / "sigmorphon2018" / f"{lang}-{split}"
    if not path.is_file():
        langs = available_languages(Path(data_dir))
        raise UserError(f"unknown SIGMORPHON language '{lang}' (no {path}; valid: "
                        f"{', '.join(langs) if langs else 'none'})")
    return path


def training_file(lang_or_file: str, data_dir: Path | None = None) -> Path:
    """A SIGMORPHON language's ``train-low`` file, or the given file path."""
    path = Path(lang_or_file)
    if path.is_file():
        return path
    if "/" in lang_or_file or "." in lang_or_file:
        raise UserError(f"{path}: {not_a_file(path)}")
    return language_file(lang_or_file, "train-low", resolve_data_dir(data_dir))
