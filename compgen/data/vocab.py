"""One id space shared by inputs and outputs, with fixed special tokens.

Special tokens come first and in a fixed order, so masks can be written as id ranges:
``<pad>`` 0, ``<s>`` 1, ``</s>`` 2, ``<unk>`` 3, ``<sep>`` 4 (between x and y in a
generative datum ``x ▷ y``), ``<copy>`` 5 (its write probability is the copy gate of the
morphology generator). Ordinary tokens follow in first-seen order.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from compgen.errors import UserError, read_text
from compgen.io import atomic_open

PAD, BOS, EOS, UNK, SEP, COPY = "<pad>", "<s>", "</s>", "<unk>", "<sep>", "<copy>"
SPECIALS = (PAD, BOS, EOS, UNK, SEP, COPY)
PAD_ID, BOS_ID, EOS_ID, UNK_ID, SEP_ID, COPY_ID = range(len(SPECIALS))


def first_seen_tokens(specials: Sequence[str], sequences: Iterable[Sequence[str]]) -> list[str]:
    """``specials``, then every other token in the order it first appears."""
    tokens = list(specials)
    seen = set(tokens)
    for seq in sequences:
        for tok in seq:
            if tok not in seen:
                seen.add(tok)
                tokens.append(tok)
    return tokens


class Vocab:
    def __init__(self, tokens: Sequence[str]):
        if tuple(tokens[: len(SPECIALS)]) != SPECIALS:
            raise UserError(f"vocabulary must start with the special tokens {list(SPECIALS)}")
        self.tokens = list(tokens)
        self.index = {tok: i for i, tok in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise UserError("vocabulary has duplicate tokens")

    @classmethod
    def build(cls, sequences: Iterable[Sequence[str]]) -> Vocab:
        return cls(first_seen_tokens(SPECIALS, sequences))

    @classmethod
    def from_table(cls, table, columns: Sequence[str] = ("x", "y")) -> Vocab:
        """Input-side tokens first, then output-side ones (the reference's merge order)."""
        return cls.build(seq for col in columns for seq in table[col].to_list())

    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, tok: str) -> bool:
        return tok in self.index

    def __eq__(self, other) -> bool:
        return isinstance(other, Vocab) and self.tokens == other.tokens

    def encode(self, seq: Sequence[str], bos: bool = False, eos: bool = False) -> list[int]:
        ids = [self.index.get(tok, UNK_ID) for tok in seq]
        return ([BOS_ID] if bos else []) + ids + ([EOS_ID] if eos else [])

    def decode(self, ids: Iterable[int], strip: bool = True) -> list[str]:
        """Map ids to tokens; with ``strip`` stop at ``</s>`` and drop ``<s>``/``<pad>``."""
        out = []
        for i in ids:
            i = int(i)
            if strip and i == EOS_ID:
                break
            if strip and i in (BOS_ID, PAD_ID):
                continue
            out.append(self.tokens[i])
        return out

    def to_json(self) -> str:
        return json.dumps({"tokens": self.tokens}, ensure_ascii=False, indent=0)

    def save(self, path: str | os.PathLike) -> None:
        with atomic_open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())

    @classmethod
    def from_json(cls, text: str, source: str = "<vocab>") -> Vocab:
        try:
            data = json.loads(text)
            tokens = data["tokens"]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            # ValueError covers JSONDecodeError and over-long integer literals
            raise UserError(f"{source}: not a compgen vocabulary ({exc})") from None
        if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
            raise UserError(f"{source}: 'tokens' must be a list of strings")
        return cls(tokens)

    @classmethod
    def load(cls, path: str | os.PathLike) -> Vocab:
        try:
            text = read_text(Path(path))
        except OSError as exc:
            raise UserError(f"{path}: cannot read vocabulary ({exc.strerror})") from None
        return cls.from_json(text, str(path))
