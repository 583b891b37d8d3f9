"""One n-gram scorer: a KenLM base model, optionally interpolated with a model trained on
a GECA-augmented corpus, the way ``compgen lm eval --mix`` mixes them (``token``,
``sentence`` or ``geca``; see ``perplexity.py``). ``compgen lm eval``, ``compgen lm
experiment`` and the samplers (``--lm``) all score through it.

Both models are scored over the base model's vocabulary (``vocabulary.py``): the
augmented model's ``<unk>`` probability is shared by the base words it lacks
(``shared_by``), so a mixture never gains from how unknown words are counted.

Scores are log10 sentence probabilities, ``<s>`` and ``</s>`` added (KenLM's
convention), so a base model alone gives exactly ``kenlm.Model.score``.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np

from compgen.errors import SettingError, UserError
from compgen.lm import scores as lm_scores
from compgen.lm.vocabulary import map_to_base_vocabulary, model_vocabulary

LN10 = math.log(10.0)


def parse_lm_spec(spec: str, setting: str = "lm") -> tuple[Path, Path | None]:
    """``base.bin[,aug.bin]`` -> (base, aug or None)."""
    parts = [p.strip() for p in spec.split(",")]
    if not 1 <= len(parts) <= 2 or not all(parts):
        raise SettingError(f"`{setting}` {spec}: expected BASE or BASE,AUG (model files)")
    return Path(parts[0]), Path(parts[1]) if len(parts) == 2 else None


class NgramScorer:
    """A base KenLM model and an optional augmented one, mixed with ``weight`` (the
    augmented model's weight; the ``geca`` mix's ratio r). Loading checks both files,
    so a missing or corrupt model is a UserError before any other work."""

    def __init__(self, base: str | os.PathLike, aug: str | os.PathLike | None = None,
                 mix: str = "token", weight: float | None = None,
                 settings: tuple[str | None, str | None] = ("lm", "lm")):
        if mix not in lm_scores.MIXES:
            raise SettingError(f"`mix` must be one of {', '.join(lm_scores.MIXES)} (got {mix!r})")
        self.base_path, self.aug_path, self.mix = Path(base), aug and Path(aug), mix
        self.base = lm_scores.load_model(self.base_path, settings[0])
        self.aug = self.base_vocab = self.aug_vocab = None
        if self.aug_path is not None:   # the vocabularies matter only for a mixture
            self.base_vocab = model_vocabulary(self.base_path, self.base, settings[0])
            self.aug = lm_scores.load_model(self.aug_path, settings[1])
            self.aug_vocab = model_vocabulary(self.aug_path, self.aug, settings[1])
        self.weight = 0.0
        if weight is not None:
            self.set_weight(weight)
        self.seconds = 0.0      # time spent scoring (for the sampling-time share)
        self.sentences = 0

    @classmethod
    def from_spec(cls, spec: str, mix: str = "token", weight: float | None = None,
                  setting: str = "lm") -> NgramScorer:
        base, aug = parse_lm_spec(spec, setting)
        return cls(base, aug, mix, weight, (setting, setting))

    @property
    def order(self) -> int:
        return int(self.base.order)

    @property
    def shared_by(self) -> int:
        """Events the augmented model's <unk> mass is shared by (1: nothing to share)."""
        if self.aug_vocab is None:
            return 1
        return len(self.base_vocab - self.aug_vocab) + 1

    def set_weight(self, weight: float) -> None:
        if self.aug is None and weight != 0.0:
            raise SettingError(f"`lm_weight` {weight:g}: needs an augmented model (`lm` BASE,AUG)")
        if not math.isfinite(weight) or weight < 0 or (self.mix != "geca" and weight > 1):
            bound = ">= 0" if self.mix == "geca" else "in [0, 1]"
            raise SettingError(f"`lm_weight` {weight:g}: the {self.mix} mix needs a weight {bound}")
        self.weight = float(weight)

    # ------------------------------------------------------------------ scoring

    def corpus_scores(self, sentences: list[str]):
        """(base CorpusScores, aug CorpusScores mapped onto the base vocabulary or None,
        OovCounts or None) of space-joined sentences."""
        base = lm_scores.score_corpus(self.base, sentences)
        if self.aug is None:
            return base, None, None
        aug, oov = map_to_base_vocabulary(base, lm_scores.score_corpus(self.aug, sentences),
                                          self.base_vocab, self.aug_vocab)
        return base, aug, oov

    def score(self, sentences: list[str]) -> np.ndarray:
        """log10 probability of each sentence under the mixture at the current weight."""
        start = time.perf_counter()
        if self.aug is None or self.weight == 0.0:
            result = np.fromiter((self.base.score(s) for s in sentences), dtype=np.float64,
                                 count=len(sentences))
        else:
            base, aug, _ = self.corpus_scores(sentences)
            result = -lm_scores.mix(self.mix, base, aug, self.weight) / LN10
        models = ",".join(str(p) for p in (self.base_path, self.aug_path) if p is not None)
        lm_scores.check_finite(result, self.base, lm_scores.model_name(models, "lm"))
        self.record(len(sentences), time.perf_counter() - start)
        return result

    def record(self, sentences: int, seconds: float) -> None:
        """Count scoring work (also the C++ runner's, which scores with its own copy)."""
        self.sentences += sentences
        self.seconds += seconds

    def choose_weight(self, sentences: list[str], grid: list[float] | None = None) -> dict:
        """Set the weight with the lowest perplexity on ``sentences`` (a validation
        corpus); returns {weight: perplexity} for the grid."""
        if self.aug is None:
            raise UserError("choosing a weight needs an augmented model (BASE,AUG)")
        if not sentences:
            raise UserError("choosing a weight needs a non-empty validation corpus")
        grid = list(grid or lm_scores.DEFAULT_WEIGHTS[self.mix])
        base, aug, _ = self.corpus_scores(sentences)
        table = {w: lm_scores.perplexity(lm_scores.mix(self.mix, base, aug, w), base.n_tokens) for w in grid}
        self.set_weight(min(grid, key=lambda w: (table[w], grid.index(w))))
        return table


# ------------------------------------------------------------------ sides of a sample

SIDES = ("y", "x", "xy")
SIDE_SEPARATOR = "<sep>"   # between x and y for side xy (the generators' own separator)


def _word(token: str) -> str:
    # KenLM splits on whitespace: a space token is written as U+2581, as compgen/io.py does
    return "\u2581" if not token.strip() else token.replace(" ", "\u2581")


def side_text(x, y, side: str) -> str:
    """The sentence an LM reads for one (x, y) pair: y, x, or x <sep> y."""
    if side == "y":
        words = list(y)
    elif side == "x":
        words = list(x)
    elif side == "xy":
        words = [*x, SIDE_SEPARATOR, *y]
    else:
        raise SettingError(f"`lm_side` {side}: unknown (valid: {', '.join(SIDES)})")
    return " ".join(_word(w) for w in words)
