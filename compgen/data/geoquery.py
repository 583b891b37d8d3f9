"""GeoQuery (Zelle & Mooney 1996) as text2sql-data ships it (Finegan-Dollak et al. 2018):
880 questions about US geography with SQL queries (``geography.json``) or logical forms
(``geography-logic.txt``, the same JSON layout).

Named sets ``geoquery/<mrl>-<split>``: ``mrl`` is ``sql`` or ``logic``, ``split`` is
``query`` (no query template in two parts) or ``question`` (no question in two parts).
Built as the GECA paper's loader builds them (jacobandreas/geca ``data/semparse.py``):

* per entry its first query string, with ``"``, ``(`` and ``)`` spaced out;
* per sentence every variable substituted in both the query and the question, in the
  order the file lists them (plain text replacement, as the reference does);
* the question lowercased and split on whitespace, the query split on whitespace (the
  reference leaves the question's case; no question in text2sql-data has a capital);
* the split: ``query-split`` of the entry or ``question-split`` of the sentence; a
  numeric fold counts as dev (8), test (9) or train (any other);
* the paper's test mode: the dev rows join train. The table's ``train`` split holds them
  (SQL query split: 536 + 159 = 695 rows) and its ``dev`` split repeats them, the set the
  reference watches for its learning-rate schedule.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from compgen.data.sources import named_data_text
from compgen.errors import SettingError, UserError

FILES = {"sql": "geography.json", "logic": "geography-logic.txt"}
QUERY_KEYS = {"sql": "sql", "logic": "logic"}
SPLITS = ("query", "question")
NAMES = tuple(f"{mrl}-{split}" for mrl in FILES for split in SPLITS)
DEV_FOLD, TEST_FOLD = "8", "9"


def spaced(query: str) -> str:
    return query.replace('"', ' " ').replace("(", " ( ").replace(")", " ) ")


def fold_split(fold: str) -> str:
    if fold in ("train", "dev", "test"):
        return fold
    return {DEV_FOLD: "dev", TEST_FOLD: "test"}.get(fold, "train")


def parse_geoquery(entries, mrl: str, split: str, source: str) -> pl.DataFrame:
    """The example table of ``entries`` (the parsed JSON list) for ``mrl`` and ``split``."""
    xs, ys, splits = [], [], []
    if not isinstance(entries, list):
        raise UserError(f"{source}: expected a JSON list of entries")
    for k, entry in enumerate(entries):
        where = f"{source}: entry {k}"
        try:
            query = spaced(entry[QUERY_KEYS[mrl]][0])
            sentences = entry["sentences"]
            for sentence in sentences:
                x, y = sentence["text"], query
                for name, value in sentence["variables"].items():
                    y, x = y.replace(name, value), x.replace(name, value)
                fold = entry["query-split"] if split == "query" else sentence["question-split"]
                xs.append(x.lower().split())
                ys.append(y.split())
                splits.append(fold_split(str(fold)))
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise UserError(f"{where}: not a text2sql-data entry ({exc!r} missing or malformed)") from None
        if xs and (not xs[-1] or not ys[-1]):
            raise UserError(f"{where}: an empty question or query")
    if not xs:
        raise UserError(f"{source}: no GeoQuery examples")
    table = pl.DataFrame({"x": xs, "y": ys, "split": splits},
                         schema={"x": pl.List(pl.String), "y": pl.List(pl.String), "split": pl.String})
    # the paper's test mode: dev joins train; the dev rows stay as the schedule's dev set
    dev = table.filter(pl.col("split") == "dev")
    return pl.concat([table.filter(pl.col("split") == "train"),
                      dev.with_columns(pl.lit("train").alias("split")),
                      dev, table.filter(pl.col("split") == "test")])


def load_geoquery(name: str, data_dir: Path) -> pl.DataFrame:
    """``name``: ``sql-query``, ``sql-question``, ``logic-query`` or ``logic-question``."""
    if name not in NAMES:
        raise UserError(f"unknown data set 'geoquery/{name}' "
                        f"(valid: {', '.join('geoquery/' + n for n in NAMES)})")
    mrl, split = name.split("-")
    path = data_dir / "geoquery" / FILES[mrl]
    if path.exists() and not path.is_file():
        raise UserError(f"{path}: not a regular file (a folder, FIFO or device)")
    if not path.is_file():
        raise SettingError(f"{path}: missing; run 'compgen data fetch geoquery' or set `data_dir`")
    try:
        entries = json.loads(named_data_text(path, data_dir))
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}:{exc.lineno}: not JSON ({exc.msg})") from None
    return parse_geoquery(entries, mrl, split, str(path))
