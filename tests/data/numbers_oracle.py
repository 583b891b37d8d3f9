"""Oracle of the numbers data set (tests/data/numbers): digits -> English words.

``correct(x, y)`` says whether the words ``y`` spell the number whose digits are ``x``
("3 4 7" -> "three hundred forty seven"). Run as a program it is an ``--oracle`` command
of ``compgen sample``: it reads ``x<TAB>y`` lines on stdin and prints ``1`` or ``0`` per
line.
"""

from __future__ import annotations

import sys

UNITS = ["", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
TEENS = ["ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen",
         "seventeen", "eighteen", "nineteen"]
TENS = ["", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


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


def correct(x: list[str], y: list[str]) -> bool:
    if not 1 <= len(x) <= 3 or not all(len(d) == 1 and d.isdigit() for d in x) or x[0] == "0":
        return False
    return words(int("".join(x))) == list(y)


def main() -> None:
    for line in sys.stdin:
        x, _, y = line.rstrip("\n").partition("\t")
        print(1 if correct(x.split(), y.split()) else 0, flush=False)


if __name__ == "__main__":
    main()
