"""The user's data files and folders, read into the example table (``table.py``).

One reader dispatches by format: ``.jsonl``/``.ndjson`` (one JSON object a line),
``.json`` (an array of objects), ``.csv``, ``.parquet``, ``.arrow`` (Arrow IPC, as Hugging
Face ``datasets`` writes it) by the file's name; anything else by its content: SCAN
lines, COGS, SIGMORPHON, ``x<TAB>y`` (with a header line of known column names, or
``columns`` given, or ``x_field``/``y_field`` naming columns of its header line), a samples
TSV, or a plain corpus (one sentence a line). A file whose content contradicts its reading
(a JSON object or a CSV header in a corpus, a tab in a corpus, a header line of other
names, an id column or a sentence where COGS has its type) is a UserError naming the file
and line, never read as something else.

Record formats (JSONL, JSON, CSV, Parquet, Arrow, TSV with a header) take the input from
``x_field`` and the output from ``y_field``, by default the first present of x / input /
source / src and y / output / target / tgt; a field holds text (split on white space)
or a list of tokens. A ``split`` field, when present, gives each row's split
(validation/valid/val read as dev).

A folder is a data set with splits: files named ``train``, ``dev`` (or ``validation``,
``valid``, ``val``) and ``test`` with any of the extensions above, or a Hugging Face
``datasets`` folder (``save_to_disk``: ``dataset_dict.json`` and one folder of Arrow files
per split, read by Polars without the ``datasets`` package).

Text is read as UTF-8; a byte-order mark is dropped and the text NFC-normalised.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl

from compgen.data import cogs, lm, scan, sigmorphon
from compgen.data.record_checks import (
    check_csv_header,
    check_header,
    check_records,
    csv_rows_without_blank_lines,
    load_json,
)
from compgen.data.table import SCHEMA, make_table
from compgen.data.vocab import SPECIALS
from compgen.errors import SettingError, UserError, not_a_file, read_text, where
from compgen.io import parse_samples_tsv, unwritable_token

X_NAMES = ("x", "input", "source", "src")
Y_NAMES = ("y", "output", "target", "tgt")
# first-line fields that make a TSV line a header, not data
HEADER_NAMES = frozenset(X_NAMES + Y_NAMES + ("split", "id", "label", "type", "category"))
# one column name in a header line: a word starting with a letter
_COLUMN_NAME = re.compile(r"[^\W\d][\w.\-/()]*")
SPLIT_NAMES = {"train": "train", "dev": "dev", "validation": "dev", "valid": "dev",
               "val": "dev", "test": "test"}
RECORD_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv",
                   ".parquet": "parquet", ".arrow": "arrow"}
FOLDER_SUFFIXES = (".tsv", ".txt", *RECORD_SUFFIXES)


@dataclass(frozen=True)
class Fields:
    """Which columns of a record file hold x and y; ``columns`` names a header-less TSV's
    columns (the first line is then data)."""

    x: str | None = None
    y: str | None = None
    columns: tuple[str, ...] | None = None

    def record(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()
                if v is not None}

    @classmethod
    def of_source(cls, source: dict | None) -> Fields:
        """The fields a checkpoint's ``data_source`` (``source_record``) says its data
        file was read with; the usual names for a named set or an older checkpoint."""
        recorded = (source or {}).get("fields") or {}
        columns = recorded.get("columns")
        return cls(recorded.get("x"), recorded.get("y"), tuple(columns) if columns else None)


def parse_columns(text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    names = tuple(name.strip() for name in text.split(","))
    if len(names) < 2 or not all(names) or len(set(names)) != len(names):
        raise SettingError(f"`columns` {text!r}: give two or more distinct names, "
                           "comma-separated (e.g. input,output)")
    return names


def data_text(path: Path) -> str:
    """The file's text, byte-order mark dropped, NFC-normalised."""
    return unicodedata.normalize("NFC", read_text(path).removeprefix("\ufeff"))


# ------------------------------------------------------------------ dispatch

def read_data_path(path: Path, fields: Fields | None = None) -> pl.DataFrame:
    """A data file (every row ``train`` unless it has a split field) or a folder of
    split files, as an example table."""
    fields = fields or Fields()
    if path.is_dir():
        return read_folder(path, fields)
    if path.exists() and not path.is_file():
        raise UserError(f"{path}: not a regular file (a FIFO, socket or device)")
    if not path.is_file():
        raise UserError(f"{path}: no such file or folder (and not a data set name; see "
                        "'compgen data list')")
    return read_data_file(path, fields)


def read_data_file(path: Path, fields: Fields | None = None, split: str = "train") -> pl.DataFrame:
    fields = fields or Fields()
    kind = RECORD_SUFFIXES.get(path.suffix.lower())
    if kind is not None:
        table = _read_records(path, kind, fields, split)
    else:
        table = _read_text_file(path, data_text(path), fields, split)
    _refuse_special_words(table, path, kind)
    _refuse_unwritable_tokens(table, path, kind)
    return table


def _refuse_unwritable_tokens(table: pl.DataFrame, path: Path, kind: str | None) -> None:
    """A token holding white space, NUL or U+2581 (or an empty one) would be written by
    GECA and the samplers as something else than read: refused where the data is read,
    naming the line where its row sits (a row number where that is not known)."""
    found = unwritable_token(table)
    if found is None:
        return
    row, side, token, what = found
    place = f"{path} (row {row + 1})"
    if kind not in ("parquet", "arrow"):
        lines = data_text(path).splitlines()
        shown = json.dumps(token)[1:-1] if kind in ("jsonl", "json") else token
        line = next((n for n, line in enumerate(lines, 1) if token and shown in line), None)
        place = where(path, line) if line is not None else place
    raise UserError(f"{place}: the {side} token {token!r} {what}; compgen writes tokens "
                    "space-separated in tab-separated lines, where it would not read back "
                    "as itself: remove or replace it")


def _refuse_special_words(table: pl.DataFrame, path: Path, kind: str | None) -> None:
    """A data word spelled as one of compgen's special tokens (``<sep>``, ``<unk>``, ...)
    would silently take that token's id: refused, naming the line where it first occurs
    (a row number for Parquet and Arrow files)."""
    specials = list(SPECIALS)
    for side in ("x", "y"):
        hits = table[side].list.eval(pl.element().is_in(specials)).list.any()
        if not hits.any():
            continue
        row = int(hits.arg_true()[0])
        word = next(token for token in table[side][row] if token in specials)
        place = f"{path} (row {row + 1})"
        if kind not in ("parquet", "arrow"):
            text = data_text(path)
            line = next((n for n, line in enumerate(text.splitlines(), 1)
                         if word in re.split(r"[\s\"',\[\]]+", line)), None)
            place = where(path, line) if line is not None else place
        raise UserError(f"{place}: the word {word!r} is spelled as one of compgen's special "
                        f"tokens ({', '.join(SPECIALS)}), whose id it would take; rename it")


def read_folder(path: Path, fields: Fields | None = None) -> pl.DataFrame:
    if (path / "dataset_dict.json").is_file():
        return _read_hf_folder(path, fields)
    found: dict[str, Path] = {}
    for file in sorted(path.iterdir()):
        stem, dot, suffix = file.name.partition(".")
        split = SPLIT_NAMES.get(stem.lower())
        if split is None or file.name.startswith("."):
            continue
        if file.exists() and not file.is_file():   # a FIFO would block the read forever
            raise UserError(f"{file}: not a regular file (a FIFO, socket or device); a data "
                            "folder holds files")
        if dot and "." + suffix.lower() not in FOLDER_SUFFIXES:
            raise UserError(f"{file}: unknown format '.{suffix}' (expected one of "
                            f"{', '.join(FOLDER_SUFFIXES)})")
        if split in found:
            raise UserError(f"{path}: two files for the {split} split ({found[split].name} "
                            f"and {file.name}); keep one")
        found[split] = file
    if not found:
        raise UserError(f"{path}: a data folder holds train, dev and/or test files "
                        f"(train.tsv, test.jsonl, ...) or a Hugging Face dataset_dict.json; "
                        "found none")
    order = ("train", "dev", "test")
    parts = [read_data_file(found[split], fields, split) for split in order if split in found]
    return _concat(parts, path)


def _concat(parts: list[pl.DataFrame], source: Path) -> pl.DataFrame:
    columns = [set(p.columns) for p in parts]
    if any(c != columns[0] for c in columns):
        raise UserError(f"{source}: the split files differ in kind (columns "
                        f"{' / '.join(','.join(sorted(c)) for c in columns)})")
    return pl.concat([p.select(parts[0].columns) for p in parts])


# ------------------------------------------------------------------ record formats

def _read_records(path: Path, kind: str, fields: Fields, split: str) -> pl.DataFrame:
    frame, place = _record_frame(path, kind)
    return records_table(frame, str(path), fields, split, **place)


def _record_frame(path: Path, kind: str) -> tuple[pl.DataFrame, dict]:
    """A record file's frame, and where its rows sit in the file (for error messages)."""
    if kind in ("parquet", "arrow"):
        return _read_binary(path, kind), {"first_line": None}
    text = data_text(path)
    if not text.strip():
        raise UserError(f"{path}: empty file")
    if kind == "jsonl":
        frame, lines = _read_jsonl(text, path)
        return frame, {"lines": lines}
    if kind == "json":
        return _read_json_array(text, path), {"first_line": None}
    check_csv_header(text, path)
    try:
        frame = pl.read_csv(io.BytesIO(text.encode()), infer_schema=False)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise UserError(f"{path}: not a CSV file with a header line ({str(exc).splitlines()[0]})") from None
    frame, lines = csv_rows_without_blank_lines(frame, text)
    return frame, {"lines": lines}


def _read_binary(path: Path, kind: str) -> pl.DataFrame:
    try:
        if kind == "parquet":
            return pl.read_parquet(path)
        try:
            return pl.read_ipc_stream(path)   # what datasets writes
        except pl.exceptions.PolarsError:
            return pl.read_ipc(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise UserError(f"{path}: not a {kind} file ({str(exc).splitlines()[0]})") from None


def _read_jsonl(text: str, path: Path) -> tuple[pl.DataFrame, list[int]]:
    lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
    body = "\n".join(line for _, line in lines)
    try:
        frame = pl.read_ndjson(io.BytesIO(body.encode()), infer_schema_length=None)
    except (pl.exceptions.PolarsError, ValueError, RuntimeError):
        frame = None
    if frame is None or frame.height != len(lines):
        for n, line in lines:   # the error path only: find the line that does not parse
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UserError(f"{where(path, n)}: not a JSON object ({exc.msg}); a .jsonl "
                                "file holds one JSON object a line") from None
            except RecursionError:
                raise UserError(f"{where(path, n)}: JSON nested too deeply to read") from None
            if not isinstance(value, dict):
                raise UserError(f"{where(path, n)}: a JSON {type(value).__name__}, expected "
                                "an object such as {\"input\": ..., \"output\": ...}")
        raise UserError(f"{path}: the JSON objects do not form one table (fields of "
                        "differing types)")
    check_records([load_json(line, where(path, n)) for n, line in lines],
                  lambda i: where(path, lines[i][0]))
    return frame, [n for n, _ in lines]


def _read_json_array(text: str, path: Path) -> pl.DataFrame:
    try:
        value = load_json(text, str(path))
    except json.JSONDecodeError as exc:
        raise UserError(f"{where(path, exc.lineno)}: not JSON ({exc.msg})") from None
    except RecursionError:
        raise UserError(f"{path}: JSON nested too deeply to read") from None
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise UserError(f"{path}: a .json data file is an array of objects "
                        "(for one object a line, name it .jsonl)")
    check_records(value, lambda i: f"{path} (object {i + 1})")
    try:
        return pl.DataFrame(value, infer_schema_length=None)
    except (pl.exceptions.PolarsError, TypeError, ValueError) as exc:
        raise UserError(f"{path}: the objects do not form one table ({exc})") from None


def _pick(columns: Sequence[str], chosen: str | None, defaults: Sequence[str], side: str,
          option: str, source: str) -> str:
    if chosen is not None:
        if chosen not in columns:
            raise SettingError(f"{source}: no field '{chosen}' (`{option}`); have: "
                               f"{', '.join(columns)}")
        return chosen
    present = [name for name in defaults if name in columns]
    if not present:
        raise SettingError(f"{source}: no {side} field: expected one of {', '.join(defaults)} "
                           f"(or name it with `{option}`); have: {', '.join(columns)}")
    return present[0]


def records_table(frame: pl.DataFrame, source: str, fields: Fields | None = None,
                  split: str = "train", first_line: int | None = 1,
                  lines: Sequence[int] | None = None) -> pl.DataFrame:
    """A frame of records (one row per example) -> the example table. ``first_line`` is
    the file line of the first row (``lines`` gives each row's), for error messages."""
    fields = fields or Fields()
    if frame.height == 0:
        raise UserError(f"{source}: no examples")
    xcol = _pick(frame.columns, fields.x, X_NAMES, "input (x)", "x_field", source)
    ycol = _pick(frame.columns, fields.y, Y_NAMES, "output (y)", "y_field", source)
    if xcol == ycol:
        raise UserError(f"{source}: x and y are the same field '{xcol}'")
    exprs = [_tokens(frame, name, side, source, first_line, lines) for name, side in
             ((xcol, "x"), (ycol, "y"))]
    splits = pl.lit(split)
    if "split" in frame.columns and "split" not in (xcol, ycol):
        splits = _split_column(frame, source)
    return frame.select(*exprs, splits.alias("split")).cast(SCHEMA)


def _row_place(source: str, row: int, first_line: int | None, lines: Sequence[int] | None) -> str:
    if lines is not None:
        return where(source, lines[row])
    if first_line is not None:
        return where(source, first_line + row)
    return f"{source} (row {row + 1})"


def _tokens(frame: pl.DataFrame, name: str, side: str, source: str,
            first_line: int | None, lines: Sequence[int] | None) -> pl.Expr:
    column = frame[name]
    nulls = column.is_null()
    if nulls.any():
        row = int(nulls.arg_true()[0])
        raise UserError(f"{_row_place(source, row, first_line, lines)}: no value for the "
                        f"{side} field '{name}'")
    if column.dtype in (pl.String, pl.List(pl.String)):
        # `""` (or `[]`) is as empty as a missing value, which is refused above
        empty = (column.str.strip_chars() == "" if column.dtype == pl.String
                 else column.list.len() == 0)
        if empty.any():
            row = int(empty.arg_true()[0])
            raise UserError(f"{_row_place(source, row, first_line, lines)}: the {side} field "
                            f"'{name}' is empty")
    if column.dtype == pl.String:
        return pl.col(name).str.normalize("NFC").str.extract_all(r"\S+").alias(side)
    if column.dtype == pl.List(pl.String):
        return pl.col(name).list.eval(pl.element().str.normalize("NFC")).alias(side)
    raise UserError(f"{source}: the {side} field '{name}' holds {column.dtype}, expected text "
                    "or a list of tokens")


def _split_column(frame: pl.DataFrame, source: str) -> pl.Expr:
    if frame["split"].dtype != pl.String or frame["split"].is_null().any():
        raise UserError(f"{source}: the split field must be text in every row")
    names = set(frame["split"].unique().to_list())
    unknown = sorted(names - set(SPLIT_NAMES))
    if unknown:
        raise UserError(f"{source}: unknown split name(s) {', '.join(unknown)} in the split "
                        f"field (expected {', '.join(SPLIT_NAMES)})")
    return pl.col("split").replace_strict(SPLIT_NAMES)


# ------------------------------------------------------------------ Hugging Face folders

def _read_hf_folder(path: Path, fields: Fields | None) -> pl.DataFrame:
    """``datasets``' ``save_to_disk`` layout: dataset_dict.json names the splits, each a
    folder of Arrow stream files."""
    try:
        splits = json.loads(data_text(path / "dataset_dict.json"))["splits"]
        if not isinstance(splits, list) or not all(isinstance(s, str) for s in splits):
            raise TypeError(splits)
    except (json.JSONDecodeError, KeyError, TypeError, RecursionError):
        raise UserError(f"{path / 'dataset_dict.json'}: expected {{\"splits\": [...]}} "
                        "(a Hugging Face datasets folder)") from None
    parts = []
    for name in splits:
        split = SPLIT_NAMES.get(str(name).lower())
        if split is None:
            raise UserError(f"{path}: split '{name}' is not train, validation/dev or test")
        files = sorted((path / name).glob("*.arrow"))
        if not files:
            raise UserError(f"{path / name}: no .arrow files for split '{name}'")
        frame = pl.concat([_read_binary(f, "arrow") for f in files])
        parts.append(records_table(frame, str(path / name), fields, split, first_line=None))
    return _concat(parts, path)


# ------------------------------------------------------------------ text files

def _first_line(text: str) -> tuple[int, str] | None:
    return next(((n, line) for n, line in enumerate(text.splitlines(), 1)
                 if line.strip() and not line.startswith("#")), None)


def _is_header(fields: Sequence[str]) -> bool:
    return len(fields) >= 2 and all(f.strip().lower() in HEADER_NAMES for f in fields)


def _read_text_file(path: Path, text: str, fields: Fields, split: str) -> pl.DataFrame:
    first = _first_line(text)
    if first is None:
        raise UserError(f"{path}: empty file")
    lineno, line = first
    samples_header = any(row.startswith("#x\t") for row in text.splitlines()[:5])
    if samples_header and fields.columns is None:
        # compgen's samples TSV: read as written, whatever its first row looks like
        rows = parse_samples_tsv(text, str(path))
        return make_table([x for x, _ in rows], [y for _, y in rows], split)
    if line.startswith("IN: "):
        return make_table(*scan.parse_scan(text, str(path)), split)
    if line.lstrip(" ").startswith("{") and _json_object(line):   # not <TAB>{...}: a corpus line
        raise UserError(f"{where(path, lineno)}: a JSON object in a file read as text; "
                        "name the file .jsonl to read it as JSON lines")
    cells = line.split("\t")
    named = fields.x is not None or fields.y is not None
    if fields.columns is not None or _is_header(cells) or (named and len(cells) >= 2):
        return _read_tsv_records(path, text, fields, split, lineno)
    if len(cells) == 1 and _is_header(line.split(",")):
        raise UserError(f"{where(path, lineno)}: a CSV header ({line.strip()!r}) in a file "
                        "read as a plain corpus; name the file .csv, or write x<TAB>y lines")
    if _looks_like_header(text, lineno, cells):
        names = [cell.strip() for cell in cells]
        raise SettingError(
            f"{where(path, lineno)}: the first line looks like a header ({', '.join(names)}), "
            f"not data: name the fields to read by it (`x_field` {names[-2]} `y_field` "
            f"{names[-1]}), or give `columns` if the line is data")
    if len(cells) == 2 or (len(cells) >= 3 and _is_number(cells[2])):
        rows = parse_samples_tsv(text, str(path))
        return make_table([x for x, _ in rows], [y for _, y in rows], split)
    if len(cells) == 3:
        kind = "cogs" if path.suffix == ".tsv" and not _sigmorphon_tags(text) else "sigmorphon"
        _check_three_columns(path, text, kind)
        if kind == "cogs":
            xs, ys, types = cogs.parse_cogs(text, str(path))
            return make_table(xs, ys, split).with_columns(pl.Series("type", types))
        return sigmorphon.make_morph_table(sigmorphon.parse_sigmorphon(text, str(path)), split)
    if len(cells) > 3:
        raise SettingError(f"{where(path, lineno)}: {len(cells)} tab-separated fields: not "
                           "x<TAB>y, SCAN, COGS, SIGMORPHON or a corpus (a TSV with more "
                           "columns needs a header line or `columns`)")
    for n, row in enumerate(text.splitlines(), 1):
        if "\t" in row:
            raise UserError(f"{where(path, n)}: a tab in a plain corpus (the first line has none)")
    ys = lm.parse_corpus(text, str(path))
    return make_table([[] for _ in ys], ys, split)


def _data_rows(text: str, after: int) -> Iterator[tuple[int, list[str]]]:
    """(line number, tab-separated fields) of the non-blank, non-comment lines after line
    ``after``."""
    for n, row in enumerate(text.splitlines()[after:], after + 1):
        if row.strip() and not row.startswith("#"):
            yield n, row.split("\t")


def _looks_like_header(text: str, lineno: int, cells: Sequence[str]) -> bool:
    """A first line of column names the reader does not know (``question<TAB>sql``): every
    field one name, a column whose other rows mostly hold several tokens, and a name that
    no other row of its column holds (a data row's words recur: ``jump<TAB>I_JUMP``)."""
    if len(cells) < 2 or not all(_COLUMN_NAME.fullmatch(cell.strip()) for cell in cells):
        return False
    rows = [fields for _, fields in _data_rows(text, lineno) if len(fields) == len(cells)]
    if not rows:
        return False
    columns = list(zip(*rows))
    sentences = any(2 * sum(len(value.split()) > 1 for value in column) > len(column)
                    for column in columns)
    fresh = any(all(name.strip() not in value.split() for value in column)
                for name, column in zip(cells, columns))
    return sentences and fresh


def _sigmorphon_tags(text: str) -> bool:
    """Whether every third field is a SIGMORPHON tag set (``V;PST``, as STEM-CORRUPT writes
    it), not a COGS type (a lower-case word), whatever the file's name."""
    tags = [fields[2].strip() for _, fields in _data_rows(text, 0) if len(fields) == 3]
    return any(";" in t for t in tags) and not any(c.islower() for t in tags for c in t)


def _check_three_columns(path: Path, text: str, kind: str) -> None:
    """A 3-column file read as COGS (sentence, logical form, type) or SIGMORPHON (lemma,
    form, tags) must look like one: no column of ids, a one-word type or tag set. Another
    table (``id<TAB>question<TAB>sql``) would be read shifted."""
    rows = list(_data_rows(text, 0))
    remedy = ("for another table of 3 columns add a header line (e.g. id<TAB>input<TAB>output) "
              "or give `columns`")
    if all(fields[0].strip().isdigit() for _, fields in rows):
        raise SettingError(f"{where(path, rows[0][0])}: the first of 3 tab-separated fields is "
                           f"a number on every line (an id column?), read as the input; {remedy}")
    reading = ("COGS (sentence, logical form, type)" if kind == "cogs"
               else "SIGMORPHON (lemma, form, tags)")
    for n, fields in rows:
        last = fields[-1].strip()
        if len(fields) == 3 and len(last.split()) > 1:
            raise SettingError(f"{where(path, n)}: 3 tab-separated fields read as {reading}, but "
                               f"the third ({last[:40]!r}) is not one word; {remedy}")


def _read_tsv_records(path: Path, text: str, fields: Fields, split: str,
                      lineno: int) -> pl.DataFrame:
    """A TSV read by column name: its header line, or ``fields.columns``."""
    body = "\n".join(row for row in text.splitlines()[lineno - 1:] if row.strip())
    header = fields.columns is None
    if header:
        check_header(text.splitlines()[lineno - 1].split("\t"), where(path, lineno))
    try:
        frame = pl.read_csv(io.BytesIO(body.encode()), separator="\t", quote_char=None,
                            has_header=header, new_columns=None if header else list(fields.columns),
                            infer_schema=False)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise UserError(f"{path}: not a TSV table ({str(exc).splitlines()[0]})") from None
    width = len(fields.columns) if fields.columns else len(text.splitlines()[lineno - 1].split("\t"))
    for n, row in enumerate(text.splitlines()[lineno - 1:], lineno):
        if row.strip() and len(row.split("\t")) != width:
            raise UserError(f"{where(path, n)}: {len(row.split(chr(9)))} tab-separated fields, "
                            f"expected {width}")
    rows = [n for n, row in enumerate(text.splitlines()[lineno - 1:], lineno) if row.strip()]
    return records_table(frame.rename({c: c.strip() for c in frame.columns}), str(path),
                         fields, split, lines=rows[1:] if header else rows)


def _json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ------------------------------------------------------------------ augmented data

def read_pairs_file(path: str | Path, option: str, fields: Fields) -> list[tuple[list[str], list[str]]]:
    """The (x, y) pairs of an augmented-data file, in any format a data file comes in: the
    augmenters' samples TSV (``x<TAB>y[<TAB>score...]``), a headed TSV, JSONL, JSON, CSV,
    Parquet or Arrow; every row counts, whatever its split. The data's ``fields`` (x and
    y) apply where the file has those fields, else the default names."""
    path = Path(path)
    if not path.is_file():
        raise SettingError(f"{option} {path}: {not_a_file(path)}")
    kind = RECORD_SUFFIXES.get(path.suffix.lower())
    if kind is not None:
        frame, place = _record_frame(path, kind)
        table = records_table(frame, str(path), _fields_present(fields, frame.columns),
                              **place)
    else:
        text = data_text(path)
        first = _first_line(text)
        names = [cell.strip() for cell in first[1].split("\t")] if first else []
        table = _read_text_file(path, text, _fields_present(fields, names), "train")
    if "lemma" in table.columns:
        raise SettingError(f"{option} {path}: a SIGMORPHON file (lemma, form, tags); augmented "
                           "data for the predictor is x<TAB>y pairs, as the augmenters write them")
    if table.height and all(not x for x in table["x"].to_list()):
        raise SettingError(f"{option} {path}: a plain corpus (one sentence a line, no inputs); "
                           "augmented data for the predictor is x<TAB>y pairs")
    return list(zip(table["x"].to_list(), table["y"].to_list()))


def _fields_present(fields: Fields, columns: Sequence[str]) -> Fields:
    """The data's named fields where ``columns`` holds them all, else the default names."""
    named = [name for name in (fields.x, fields.y) if name is not None]
    return Fields(fields.x, fields.y) if named and set(named) <= set(columns) else Fields()


# ------------------------------------------------------------------ provenance

def source_record(name: str, data_dir, fields: Fields) -> dict:
    """What a checkpoint records about its data: for a file or folder its absolute path,
    the sha256 of its files and the ``fields`` it was read with; a named set just by name."""
    path = Path(name)
    if not path.exists():
        return {"name": name}
    files = sorted(f for f in path.rglob("*") if f.is_file()) if path.is_dir() else [path]
    digest = hashlib.sha256()
    for file in files:
        digest.update(file.relative_to(path if path.is_dir() else path.parent).as_posix().encode())
        digest.update(hashlib.sha256(file.read_bytes()).digest())
    return {"name": name, "path": str(path.resolve()), "sha256": digest.hexdigest(),
            "fields": fields.record()}
