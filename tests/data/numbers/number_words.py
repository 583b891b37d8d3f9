"""A small data set that is not the papers': numbers written as digits -> English words
("7 4 2" -> "seven hundred forty two"), with a compositional split: every number from
700 to 799 whose tens digit is 2-9 is held out for test (training sees "seven hundred"
only before units and teens, and every other hundred before every tens word).

``words(digits)`` is the data set's oracle; ``python number_words.py`` writes the split in
TSV, JSONL, CSV and Parquet beside this file (the shipped files).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

UNITS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"]
TENS = ["_", "_", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def words(digits: list[str] | str) -> list[str]:
    """The English words of a number given as digit tokens (the oracle)."""
    digits = digits.split() if isinstance(digits, str) else list(digits)
    n = int("".join(digits))
    out = []
    if n >= 100:
        out += [UNITS[n // 100], "hundred"]
    rest = n % 100
    if 10 <= rest < 20:
        out.append(TEENS[rest - 10])
    else:
        if rest >= 20:
            out.append(TENS[rest // 10])
        if rest % 10 or n < 10:
            out.append(UNITS[rest % 10])
    return out


def is_correct(x: list[str] | str, y: list[str] | str) -> bool:
    """Whether ``y`` is the English reading of the digits ``x`` (False for non-numbers)."""
    x = x.split() if isinstance(x, str) else list(x)
    y = y.split() if isinstance(y, str) else list(y)
    if (not 0 < len(x) <= 3 or not all(len(d) == 1 and d in "0123456789" for d in x)
            or (len(x) > 1 and x[0] == "0")):
        return False
    return words(x) == y


def splits(seed: int = 0) -> dict[str, list[tuple[str, str]]]:
    rows = [(" ".join(str(n)), " ".join(words(list(str(n))))) for n in range(1, 1000)]
    test = [r for r in rows if r[0].startswith("7 ") and len(r[0]) == 5 and int(r[0][2]) >= 2]
    rest = [r for r in rows if r not in test]
    random.Random(seed).shuffle(rest)
    return {"train": rest[50:], "dev": rest[:50], "test": test}


def write(folder: Path) -> None:
    import polars as pl

    for split, rows in splits().items():
        frame = pl.DataFrame({"input": [x for x, _ in rows], "output": [y for _, y in rows]})
        (folder / "tsv").mkdir(parents=True, exist_ok=True)
        (folder / "tsv" / f"{split}.tsv").write_text("".join(f"{x}\t{y}\n" for x, y in rows))
        for fmt in ("jsonl", "csv", "parquet"):
            (folder / fmt).mkdir(exist_ok=True)
        frame.write_ndjson(folder / "jsonl" / f"{split}.jsonl")
        frame.write_csv(folder / "csv" / f"{split}.csv")
        frame.write_parquet(folder / "parquet" / f"{split}.parquet")


if __name__ == "__main__":
    write(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).parent)
