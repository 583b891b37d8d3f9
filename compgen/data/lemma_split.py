"""The compositional (lemma-split) SIGMORPHON test set of Goldman et al. 2022, as
Samir & Silfverberg 2023 build it.

Candidates = the rows of train-low, train-medium, train-high, dev and test, concatenated
in that order without deduplication, whose lemma is neither a train-low nor a dev lemma.
More than ``size`` candidates: a sample of ``size`` rows without replacement with seed 0,
the rows pandas' ``DataFrame.sample(n=size, random_state=0)`` returns -- pandas draws
``RandomState(0).choice(len, size, replace=False)``, i.e. the first ``size`` entries of
``RandomState(0).permutation(len)``, which is what is done here with numpy alone.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from compgen.data.sigmorphon import available_languages, parse_sigmorphon
from compgen.data.sources import resolve_data_dir
from compgen.errors import UserError, read_text

SOURCE_SPLITS = ("train-low", "train-medium", "train-high", "dev", "test")
EXCLUDED_LEMMAS_FROM = ("train-low", "dev")

Triple = tuple[str, str, str]


def lemma_split_candidates(files: dict[str, list[Triple]]) -> list[Triple]:
    """The candidate rows, in concatenation order (``files``: split name -> triples)."""
    excluded = {lemma for split in EXCLUDED_LEMMAS_FROM for lemma, _, _ in files.get(split, [])}
    return [row for split in SOURCE_SPLITS for row in files.get(split, []) if row[0] not in excluded]


def sample_rows(rows: list, size: int = 1000, seed: int = 0) -> list:
    if len(rows) <= size:
        return list(rows)
    picks = np.random.RandomState(seed).choice(len(rows), size=size, replace=False)
    return [rows[i] for i in picks]


def lemma_split_test(lang: str, data_dir: str | Path | None = None, size: int = 1000,
                     seed: int = 0) -> list[Triple]:
    """The ``size`` lemma-split test triples of a SIGMORPHON 2018 language."""
    if size < 1:
        raise UserError(f"lemma-split size must be >= 1 (got {size})")
    root = Path(resolve_data_dir(data_dir))
    files = {}
    for split in SOURCE_SPLITS:
        path = root / "sigmorphon2018" / f"{lang}-{split}"
        if path.is_file():
            rows = parse_sigmorphon(read_text(path), str(path))
            files[split] = [(lemma, form, ";".join(tags)) for lemma, form, tags in rows]
        elif split in EXCLUDED_LEMMAS_FROM:
            langs = available_languages(root)
            raise UserError(f"unknown SIGMORPHON language '{lang}' (no {path}; valid: "
                            f"{', '.join(langs) if langs else 'none'})")
    rows = lemma_split_candidates(files)
    if not rows:
        raise UserError(f"SIGMORPHON {lang}: no row has a lemma outside train-low and dev")
    return sample_rows(rows, size, seed)
