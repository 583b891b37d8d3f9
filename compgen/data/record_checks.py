"""What a record file (JSONL, JSON, CSV) says that its table would not: checks on the
file's own text, before its rows are trusted. Polars reads a JSONL file whose field is a
token list in one row and text in the next as text (the list's JSON spelling), a number
after text as text, the first of two equal keys; it renames a repeated CSV column and
counts a row broken by a quoted newline as one line. Each of these is refused here with
the file and line, or (CSV) given the row's true line."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from compgen.errors import UserError, where


class _RepeatedKey(ValueError):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list) -> dict:
    record = {}
    for key, value in pairs:
        if key in record:
            raise _RepeatedKey(key)
        record[key] = value
    return record


def load_json(text: str, place: str):
    """``json.loads`` refusing an object with a key twice (which would keep one value)."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _RepeatedKey as exc:
        raise UserError(f"{place}: the key '{exc.key}' twice in one object (one of its values "
                        "would be dropped)") from None


def _kind(value) -> str | None:
    if value is None:
        return None   # a missing value: named where the field is read
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "a list"
    return "an object"


def check_records(records: Sequence[dict], place: Callable[[int], str]) -> None:
    """One kind per field across the records (text, or a list of tokens: never text in one
    row and a list or a number in another), and a token list holds strings only.
    ``place(i)``: where record ``i`` sits in its file."""
    first: dict[str, tuple[str, int]] = {}
    for i, record in enumerate(records):
        for key, value in record.items():
            if isinstance(value, list) and any(isinstance(t, str) for t in value):
                bad = next((t for t in value if not isinstance(t, str)), "")
                if bad != "":
                    raise UserError(f"{place(i)}: the list of field '{key}' holds "
                                    f"{json.dumps(bad)} among its tokens; tokens are strings")
            kind = _kind(value)
            if kind is None:
                continue
            seen, at = first.setdefault(key, (kind, i))
            if seen != kind:
                raise UserError(f"{place(i)}: field '{key}' is {kind} here but {seen} in "
                                f"{place(at)}; a field holds one kind in every row (text, or "
                                "a list of tokens)")


def check_header(names: Sequence[str], place: str) -> None:
    """A header line names each column once (a reader would rename or drop a repeat)."""
    names = [name.strip() for name in names]
    repeated = next((name for name in names if names.count(name) > 1), None)
    if repeated is not None:
        raise UserError(f"{place}: the column '{repeated}' twice in the header line (one of "
                        "them would be dropped)")


def check_csv_header(text: str, path: Path) -> None:
    check_header(next(csv.reader(io.StringIO(text)), []), where(path, 1))


def csv_row_lines(text: str, rows: int) -> list[int] | None:
    """The file line each CSV data row starts on when a quoted field spans lines (None:
    row i is on line i + 2, as without one)."""
    if '"' not in text:
        return None
    reader = csv.reader(io.StringIO(text))
    starts, end = [], 0
    for _ in reader:
        starts.append(end + 1)
        end = reader.line_num
    starts = starts[1:]   # the header line
    return starts if len(starts) == rows else None


def csv_rows_without_blank_lines(frame, text: str):
    """The CSV ``frame`` without the empty rows Polars makes of blank lines (the TSV and
    JSONL readers skip them; here one was refused as "no value"), and the file line each
    remaining row starts on."""
    lines = csv_row_lines(text, frame.height) or list(range(2, frame.height + 2))
    source = [line.rstrip("\r") for line in text.split("\n")]
    keep = [i for i, n in enumerate(lines) if n > len(source) or source[n - 1].strip()]
    return (frame[keep] if len(keep) < frame.height else frame), [lines[i] for i in keep]
