"""User-perceived characters (grapheme clusters) for STEM-CORRUPT.

A simplified form of Unicode's extended grapheme clusters (UAX #29) built on the standard
library's ``unicodedata``: a cluster is a base character with the combining marks, variation
selectors, emoji modifiers and zero-width joiner sequences that follow it, Hangul jamo
syllables and regional-indicator pairs stay together, and CR LF is one cluster. Replacing a
whole cluster is what keeps a synthetic word free of combining marks cut from their base.
"""

from __future__ import annotations

import unicodedata

ZWJ = "\u200d"
ZWNJ = "\u200c"
# Hangul jamo classes (UAX #29 GB6-GB8): leading consonants, vowels, trailing consonants
_L = (range(0x1100, 0x1160), range(0xA960, 0xA97D))
_V = (range(0x1160, 0x11A8), range(0xD7B0, 0xD7C7))
_T = (range(0x11A8, 0x1200), range(0xD7CB, 0xD7FC))
_SYLLABLES = range(0xAC00, 0xD7A4)


def _hangul(ch: str) -> str:
    cp = ord(ch)
    if cp in _SYLLABLES:
        return "LV" if (cp - 0xAC00) % 28 == 0 else "LVT"
    for name, ranges in (("L", _L), ("V", _V), ("T", _T)):
        if any(cp in r for r in ranges):
            return name
    return ""


def extends(ch: str) -> bool:
    """Whether ``ch`` attaches to the character before it (marks, joiners, modifiers)."""
    cp = ord(ch)
    return (unicodedata.category(ch) in ("Mn", "Mc", "Me") or ch in (ZWJ, ZWNJ)
            or 0x1F3FB <= cp <= 0x1F3FF or 0xE0020 <= cp <= 0xE007F)


def _regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _joins_hangul(before: str, after: str) -> bool:
    a, b = _hangul(before), _hangul(after)
    return ((a == "L" and b in ("L", "V", "LV", "LVT")) or (a in ("LV", "V") and b in ("V", "T"))
            or (a in ("LVT", "T") and b == "T"))


def graphemes(text: str) -> list[str]:
    """``text`` split into grapheme clusters; their concatenation is ``text``."""
    clusters: list[str] = []
    for ch in text:
        if clusters:
            last = clusters[-1]
            prev = last[-1]
            joins = (
                (prev == "\r" and ch == "\n")
                or (extends(ch) and prev not in "\r\n")
                or (prev == ZWJ and len(last) > 1)
                or _joins_hangul(prev, ch)
                or (_regional(ch) and _regional(prev)
                    and sum(map(_regional, last)) % 2 == 1)
            )
            if joins:
                clusters[-1] = last + ch
                continue
        clusters.append(ch)
    return clusters


def is_letter_cluster(cluster: str) -> bool:
    """A cluster that may stand inside a word on its own: not whitespace, not a format or
    control character (bidi controls, a byte-order mark), not a mark without its base."""
    first = cluster[0]
    return not (cluster.isspace() or unicodedata.category(first)[0] in ("C", "Z")
                or extends(first))
