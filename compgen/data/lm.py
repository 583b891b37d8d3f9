"""Language-modelling corpora: one tokenised sentence per line, ``train/val/test.txt``."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from compgen.data.sources import embedded_text, named_data_text
from compgen.data.table import make_table
from compgen.errors import SettingError, UserError, not_a_file, read_text

LANGUAGES = ("kin", "lao", "na", "tok")
EMBEDDED = {"kin"}  # the package carries kin (207 kB compressed), so the demo runs offline


def parse_corpus(text: str, source: str = "<corpus>") -> list[list[str]]:
    """Whitespace-tokenised sentences; blank lines are skipped. An empty corpus is an error."""
    sentences = [line.split() for line in text.splitlines() if line.strip()]
    if not sentences:
        raise UserError(f"{source}: empty corpus (no sentences)")
    return sentences


def read_corpus(path: str | Path, split: str = "train", data_dir: Path | None = None) -> pl.DataFrame:
    """A corpus file; with ``data_dir``, a named corpus there, checked against its sum."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: {not_a_file(path)}")
    text = read_text(path) if data_dir is None else named_data_text(path, data_dir)
    ys = parse_corpus(text, str(path))
    return make_table([[] for _ in ys], ys, split)


def load_lm(lang: str, data_dir: Path) -> pl.DataFrame:
    if lang not in LANGUAGES:
        raise UserError(f"unknown LM corpus '{lang}' (valid: {', '.join(LANGUAGES)})")
    parts = []
    for split in ("train", "val", "test"):
        path = data_dir / "lm" / lang / f"{split}.txt"
        if path.is_file():
            parts.append(read_corpus(path, split, data_dir))
            continue
        relpath = f"lm/{lang}/{split}.txt"
        text = embedded_text(f"{lang}_{split}.txt", relpath) if lang in EMBEDDED else None
        if text is None:
            raise SettingError(f"{path}: missing; run 'compgen data fetch lm' or set `data_dir`")
        ys = parse_corpus(text, f"<embedded {relpath}>")
        parts.append(make_table([[] for _ in ys], ys, split))
    return pl.concat(parts)
