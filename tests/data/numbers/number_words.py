#!/usr/bin/env python3
"""The numbers data set (this folder): digits -> English words ("3 4 7" -> "three hundred
forty seven", 1 to 999) with a held-out primitive, as SCAN's add-primitive splits: training
holds every number without the digit 9 plus four that show it (9, 19, 90, 900; 732 pairs);
dev (40) and test (100) are other numbers with a 9, so a model must put the rare primitive
into new combinations.

``is_correct(x, y)`` is the data set's oracle. As a program it is an ``--oracle`` command of
``compgen sample``: it reads ``x<TAB>y`` lines on stdin and prints ``1`` or ``0`` per line.
``python number_words.py --write [FOLDER]`` writes the split in TSV, JSONL, CSV and Parquet
(the shipped ``tsv/``, ``jsonl/``, ``csv/`` and ``parquet/`` folders).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

UNITS = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
         "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
SHOWN = (9, 19, 90, 900)   # the numbers with a 9 that training sees


def words(number: int) -> list[str]:
    """English words of 1 <= number <= 999."""
    hundreds, rest = divmod(number, 100)
    out = [UNITS[hundreds], "hundred"] if hundreds else []
    if 10 <= rest < 20:
        out.append(TEENS[rest - 10])
    else:
        tens, units = divmod(rest, 10)
        out += [w for w in (TENS[tens], UNITS[units]) if w]
    return out


def is_correct(x: list[str] | str, y: list[str] | str) -> bool:
    """Whether ``y`` is the English reading of the digit tokens ``x`` (False for anything
    that is not a number from 1 to 999 written digit by digit)."""
    x = x.split() if isinstance(x, str) else list(x)
    y = y.split() if isinstance(y, str) else list(y)
    if (not 1 <= len(x) <= 3 or not all(len(d) == 1 and d in "0123456789" for d in x)
            or x[0] == "0"):
        return False
    return words(int("".join(x))) == y


def splits(seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    def pair(n: int) -> tuple[str, str]:
        return " ".join(str(n)), " ".join(words(n))

    train = [n for n in range(1, 1000) if "9" not in str(n) or n in SHOWN]
    held = [n for n in range(1, 1000) if "9" in str(n) and n not in SHOWN]
    rng = random.Random(seed)
    rng.shuffle(train)
    rng.shuffle(held)
    return {"train": [pair(n) for n in train], "dev": [pair(n) for n in held[:40]],
            "test": [pair(n) for n in held[40:140]]}


def write(folder: Path) -> None:
    import polars as pl

    for fmt in ("tsv", "jsonl", "csv", "parquet"):
        (folder / fmt).mkdir(parents=True, exist_ok=True)
    for split, rows in splits().items():
        frame = pl.DataFrame({"input": [x for x, _ in rows], "output": [y for _, y in rows]},
                             schema={"input": pl.String, "output": pl.String})
        (folder / "tsv" / f"{split}.tsv").write_text("".join(f"{x}\t{y}\n" for x, y in rows))
        frame.write_ndjson(folder / "jsonl" / f"{split}.jsonl")
        frame.write_csv(folder / "csv" / f"{split}.csv")
        frame.write_parquet(folder / "parquet" / f"{split}.parquet")


def oracle() -> None:
    for line in sys.stdin:
        x, _, y = line.rstrip("\n").partition("\t")
        print(1 if is_correct(x, y) else 0)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write"]:
        write(Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).parent)
    else:
        oracle()
