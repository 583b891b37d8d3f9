"""One vocabulary for two KenLM models: the base model's.

Two n-gram models trained on different corpora know different words. Each gives its
``<unk>`` probability to every word it does not know, and that probability stands for the
mass of *all* its unknown words. Mixing the two token by token then over-credits the
augmented model: a test word the base model knows but the augmented model does not gets
the augmented model's whole ``<unk>`` mass, although the base vocabulary names it. (GECA's
synthetic sentences alone know a quarter of the words of their training corpus, so the
mixture "improves" perplexity by scoring unknown words generously.)

Both models are therefore compared over the base model's vocabulary V:

* a test token the base model does not know is the ``<unk>`` event of V, in every row;
* the augmented model A is mapped onto V: a word it knows keeps its probability; its
  ``<unk>`` mass is shared equally by the k events it cannot tell apart, the base words it
  lacks and ``<unk>`` (k = |V \\ V_A| + 1). Words A knows beyond V fall under V's
  ``<unk>``; A's own probability of such a word is used for that event, a lower bound.

The mapped A is a distribution over V (or gives less than 1 in total, never more), so a
mixture with it can not gain from how unknown words are counted. When A knows every base
word (an augmented corpus that contains the original one, as ``compgen lm experiment``
builds), k = 1 and nothing changes.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from compgen.errors import SettingError
from compgen.lm.model_file import checked_model_file
from compgen.lm.scores import model_name

SPECIAL = ("<unk>", "<s>", "</s>")


def model_vocabulary(path: str | os.PathLike, model=None,
                     setting: str | None = None) -> frozenset[str]:
    """The words of a KenLM model (ARPA: its unigrams; binary: the word list build_binary
    stores at the end of the file), without ``<unk>`` and ``<s>``."""
    path = Path(path)
    checked = checked_model_file(path)   # the bytes the model was loaded from
    with open(checked, "rb") as handle:
        head = handle.read(64)
    words: list[str]
    if head.lstrip().startswith(b"\\data\\"):
        words = _arpa_unigrams(checked)
    else:
        data = checked.read_bytes()
        start = data.rfind(b"<unk>\x00")
        if start < 0:
            raise SettingError(f"{model_name(path, setting)}: no word list in this KenLM "
                               "binary; give the ARPA file or rebuild it with build_binary")
        words = [w.decode("utf-8", errors="replace") for w in data[start:].split(b"\x00") if w]
    vocab = frozenset(words) - {"<unk>", "<s>"}
    # A binary's word list is found by a search: check it against the model itself.
    if model is not None and ("</s>" not in vocab or any(w not in model for w in vocab)):
        raise SettingError(f"{model_name(path, setting)}: could not read its vocabulary; "
                           "give the ARPA file")
    return vocab


def _arpa_unigrams(path: Path) -> list[str]:
    words, inside = [], False
    with open(path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            line = line.strip()
            if line == "\\1-grams:":
                inside = True
            elif inside and line.startswith("\\"):
                break
            elif inside and line:
                fields = line.split("\t")
                if len(fields) >= 2:
                    words.append(fields[1])
    return words


@dataclass
class OovCounts:
    """How the unknown words of one evaluation corpus were counted."""

    tokens: int                 # words + </s>
    unknown_to_base: int        # scored as <unk> by both models
    unknown_to_aug_only: int    # base words the augmented model lacks: its <unk> share
    shared_by: int              # k: events the augmented model's <unk> mass is shared by

    def describe(self, split: str) -> str:
        text = (f"{split}: {self.unknown_to_base:,} of {self.tokens:,} tokens unknown to the base "
                f"model, counted as <unk> by both models")
        if self.shared_by > 1:
            text += (f"; {self.unknown_to_aug_only:,} more unknown to the augmented model only get "
                     f"its <unk> probability / {self.shared_by:,} (the {self.shared_by - 1:,} base "
                     f"words it lacks + <unk>)")
        return text


def map_to_base_vocabulary(base, aug, base_vocab: frozenset[str], aug_vocab: frozenset[str]):
    """``aug`` (CorpusScores of the augmented model) mapped onto the base vocabulary, and
    the OovCounts of the corpus. Both scores must carry their ``oov`` flags."""
    if base.oov is None or aug.oov is None:
        raise ValueError("scores without OOV flags")
    shared_by = len(base_vocab - aug_vocab) + 1
    counts = OovCounts(int(base.token_log10.size), int(base.oov.sum()),
                       int((aug.oov & ~base.oov).sum()), shared_by)
    if shared_by == 1:
        return aug, counts
    token = aug.token_log10 - math.log10(shared_by) * aug.oov
    sentence = (np.add.reduceat(token, aug.starts) if token.size else
                np.zeros(0, dtype=np.float64))
    return replace(aug, token_log10=token, sentence_log10=sentence), counts
