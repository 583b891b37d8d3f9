"""Atomic file output and the samples TSV format shared by every augmenter."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from compgen.errors import UserError, where


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator:
    """Open a temporary file beside ``path``; rename it over ``path`` only on success.

    An interrupted run therefore never leaves a half-written output file.
    """
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp's 0600, not the user's umask
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# Tokens are space-joined, so a token that IS a space (a character of a multi-word
# SIGMORPHON lemma or form) is written as U+2581 and read back as a space.
SPACE_TOKEN = "\u2581"


def _field(tokens: Sequence[str]) -> str:
    return " ".join(SPACE_TOKEN if t == " " else t for t in tokens)


def field_tokens(field: str) -> list[str]:
    return [" " if t == SPACE_TOKEN else t for t in field.split()]


def write_samples_tsv(
    path: str | os.PathLike,
    pairs: Iterable[tuple[Sequence[str], Sequence[str]]],
    scores: dict[str, Sequence[float]] | None = None,
) -> int:
    """Write ``x<TAB>y[<TAB>score...]`` lines (tokens space-joined, a space token as
    U+2581); returns the row count."""
    pairs = list(pairs)
    scores = scores or {}
    for name, column in scores.items():
        if len(column) != len(pairs):
            raise ValueError(f"score column {name} has {len(column)} values, need {len(pairs)}")
    n = 0
    with atomic_open(path, "w", encoding="utf-8") as out:
        if scores:
            out.write("#x\ty\t" + "\t".join(scores) + "\n")
        for i, (x, y) in enumerate(pairs):
            fields = [_field(x), _field(y)] + [f"{scores[k][i]:.6g}" for k in scores]
            out.write("\t".join(fields) + "\n")
            n += 1
    return n


def parse_samples_tsv(text: str, source: str = "<samples>") -> list[tuple[list[str], list[str]]]:
    """Parse samples TSV text: ``x<TAB>y`` plus optional score columns; ``#`` lines are headers."""
    pairs = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise UserError(f"{where(source, lineno)}: expected 'x<TAB>y', found no tab")
        pairs.append((field_tokens(fields[0]), field_tokens(fields[1])))
    if not pairs:
        raise UserError(f"{source}: no samples in file")
    return pairs


def read_samples_tsv(path: str | os.PathLike) -> list[tuple[list[str], list[str]]]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such file")
    return parse_samples_tsv(path.read_text(encoding="utf-8"), str(path))


@contextlib.contextmanager
def quiet_native_stderr():
    """Silence what C++ libraries print straight to file descriptor 2 (torch's ONNX
    exporter warns about shape inference there); Python exceptions still propagate."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
