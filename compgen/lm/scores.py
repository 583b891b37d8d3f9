"""KenLM scores of corpora and the mixtures of two models (token, sentence, geca; see
``perplexity.py`` for what each means), at the bottom of the LM modules: the scorer,
vocabulary mapping and perplexity evaluation all build on these."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compgen.data.lm import parse_corpus
from compgen.errors import SettingError, UserError, not_a_file, read_text
from compgen.io import quiet_native_stderr
from compgen.lm.model_file import checked_model_file

LN10 = math.log(10.0)
MIXES = ("token", "sentence", "geca")
# geca: the reference's ratios (its run scripts); the others are weights of the aug model.
DEFAULT_WEIGHTS = {"token": (0.0, 0.05, 0.1, 0.2, 0.3, 0.5),
                   "sentence": (0.0, 0.05, 0.1, 0.2, 0.3, 0.5),
                   "geca": (0.0, 0.1, 0.2, 1.0)}


# ---------------------------------------------------------------------------- scoring

def model_name(path, setting: str | None = None) -> str:
    """A model file as messages name it: with the setting that gave it (`lm` PATH), else
    as ``model PATH``."""
    return f"`{setting}` {path}" if setting else f"model {path}"


def load_model(path: str | os.PathLike, setting: str | None = None):
    """A ``kenlm.Model`` (ARPA or binary), or a SettingError naming the file (and the
    ``setting`` that gave it). A model with a digest record (``compgen lm train``'s) is
    checked against it and loaded from the checked copy (``model_file``)."""
    # optional: kenlm's Python module builds from source and may be missing
    import kenlm

    path = Path(path)
    if not path.is_file():
        raise SettingError(f"{model_name(path, setting)}: {not_a_file(path)}")
    checked = checked_model_file(path)
    config = kenlm.Config()
    config.show_progress = False
    try:
        with quiet_native_stderr():   # KenLM's C++ loader prints ARPA advice straight to fd 2
            model = kenlm.Model(str(checked), config)
    except (OSError, RuntimeError, ValueError) as exc:  # ValueError: an undecodable message
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
        raise SettingError(f"{model_name(path, setting)}: not a KenLM model ({reason})") from None
    for sentence in PROBE_SENTENCES:
        check_finite(model.score(sentence), model, model_name(path, setting), sentence)
    return model


# an empty sentence (</s> after <s>), an unknown word and two common ones: a model whose
# stored probabilities are corrupt (NaN, inf) is refused on load, not after a whole run
PROBE_SENTENCES = ("", "compgen-probe-unknown-word", "the a", "<unk> <unk> <unk>")


def check_finite(values, model, name: str | None = None, sentence: str | None = None) -> None:
    """A SettingError unless every log-probability in ``values`` is finite (``name``: the
    model as ``model_name`` writes it)."""
    array = np.asarray(values, dtype=np.float64)
    if np.isfinite(array).all():
        return
    name = name or f"model {model.path if hasattr(model, 'path') else ''}".strip()
    bad = float(array[~np.isfinite(array)].flat[0])
    where = f" on {sentence!r}" if sentence is not None else ""
    raise SettingError(f"{name}: gives a non-finite log-probability ({bad}){where}; the model "
                       "file is corrupt: train or build it again")


def read_sentences(path: str | os.PathLike) -> list[str]:
    """Sentences of a corpus file, tokens joined by single spaces."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: {not_a_file(path)}")
    return [" ".join(words) for words in parse_corpus(read_text(path), str(path))]


@dataclass
class CorpusScores:
    """One model on one corpus, all log10: per token (flat, ``</s>`` included) and per
    sentence (KenLM ``score``). ``starts[i]`` is sentence i's first token index."""

    token_log10: np.ndarray
    sentence_log10: np.ndarray
    starts: np.ndarray
    oov: np.ndarray | None = None    # per token: unknown to this model (scored as <unk>)

    @property
    def n_tokens(self) -> int:
        return int(self.token_log10.size)


def score_corpus(model, sentences: list[str]) -> CorpusScores:
    lengths = np.fromiter((len(s.split()) + 1 for s in sentences), dtype=np.int64,
                          count=len(sentences))
    total = int(lengths.sum())
    scored = [(p, oov) for s in sentences for p, _, oov in model.full_scores(s)]
    tokens = np.fromiter((p for p, _ in scored), dtype=np.float64, count=total)
    oov = np.fromiter((o for _, o in scored), dtype=bool, count=total)
    sentence = np.fromiter((model.score(s) for s in sentences), dtype=np.float64,
                           count=len(sentences))
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
    if not (np.isfinite(tokens).all() and np.isfinite(sentence).all()):
        first = int(np.argmin(np.isfinite(sentence)))
        check_finite(sentence[first], model, sentence=sentences[first])
        check_finite(tokens, model)
    return CorpusScores(tokens, sentence, starts, oov)


# ---------------------------------------------------------------------------- mixing

def base_nll(base: CorpusScores) -> np.ndarray:
    """Per-sentence NLL (nats) of the base model alone, from KenLM's sentence scores."""
    return -base.sentence_log10 * LN10


def _mixture_end(base: CorpusScores, aug: CorpusScores, weight: float,
                 kind: str) -> np.ndarray | None:
    """A mixture's NLL where it is one model alone: weight 0 is exactly the base model,
    weight 1 exactly A; None between (a weight outside [0, 1] refused)."""
    if not 0.0 <= weight <= 1.0:
        raise SettingError(f"`weights`: {kind} mixture weights must be in [0, 1] (got {weight})")
    if weight == 0.0:
        return base_nll(base)
    if weight == 1.0:
        return -aug.sentence_log10 * LN10
    return None


def mix_token(base: CorpusScores, aug: CorpusScores, weight: float) -> np.ndarray:
    """Per-sentence NLL (nats) of the per-token mixture (1 - weight) B + weight A."""
    end = _mixture_end(base, aug, weight, "token")
    if end is not None:
        return end
    if base.starts.shape != aug.starts.shape or not np.array_equal(base.starts, aug.starts):
        raise ValueError("the two models were scored on different corpora")
    log_p = np.logaddexp(math.log1p(-weight) + base.token_log10 * LN10,
                         math.log(weight) + aug.token_log10 * LN10)
    return -np.add.reduceat(log_p, base.starts)


def mix_sentence(base: CorpusScores, aug: CorpusScores, weight: float) -> np.ndarray:
    """Per-sentence NLL (nats) of the sentence-level mixture (1 - weight) B + weight A."""
    end = _mixture_end(base, aug, weight, "sentence")
    if end is not None:
        return end
    return -np.logaddexp(math.log1p(-weight) + base.sentence_log10 * LN10,
                         math.log(weight) + aug.sentence_log10 * LN10)


def mix_geca(base: CorpusScores, aug: CorpusScores, ratio: float) -> np.ndarray:
    """Per-sentence NLL (nats) by the reference's formula with ratio r (spec §10):
    ``lp = logaddexp(s_B + ln(1/(1+r)), s_A + ln(r/(1+r)))`` on log10 sentence scores
    ``s``, then ``nll = -lp ln 10``. Ratio 0 is the base model."""
    if ratio < 0:
        raise SettingError(f"`weights`: geca ratios must be >= 0 (got {ratio})")
    if ratio == 0.0:
        return base_nll(base)
    lp = np.logaddexp(base.sentence_log10 + math.log(1.0 / (1.0 + ratio)),
                      aug.sentence_log10 + math.log(ratio / (1.0 + ratio)))
    return -lp * LN10


def mix(mode: str, base: CorpusScores, aug: CorpusScores | None, weight: float) -> np.ndarray:
    if aug is None or weight == 0.0:
        return base_nll(base)
    if mode == "token":
        return mix_token(base, aug, weight)
    if mode == "sentence":
        return mix_sentence(base, aug, weight)
    if mode == "geca":
        return mix_geca(base, aug, weight)
    raise SettingError(f"`mix` must be one of {', '.join(MIXES)} (got {mode!r})")


def aug_weight(mode: str, weight: float) -> float:
    """The augmented model's share for a ``--weights`` value of ``mode``."""
    return weight / (1.0 + weight) if mode == "geca" else weight


def perplexity(nll: np.ndarray, n_tokens: int) -> float:
    return float(math.exp(float(nll.sum()) / n_tokens))
