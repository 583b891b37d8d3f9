"""Scoring corpora with KenLM models, interpolating two models, perplexity, paired t-test.

Perplexity follows the GECA evaluation (geca-spec.md §10): every sentence is scored with
``<s>``/``</s>`` added by KenLM, and the token count is words + 1 per sentence (``</s>``
is predicted, ``<s>`` is not): ``ppl = exp(sum of per-sentence NLL in nats / n_tokens)``.
Blank lines of an evaluation corpus are skipped (the shared corpus reader does so; the
LM corpora have none).

Two ways to interpolate a base model B with a model A trained on the augmented corpus:

* ``token`` (default): the linear mixture per token,
  ``p(w | h) = (1 - lam) p_B(w | h) + lam p_A(w | h)``, from KenLM's per-token scores
  (``full_scores``); ``lam`` is the weight of A.
* ``sentence``: the linear mixture of the two sentence distributions,
  ``p(x) = (1 - lam) p_B(x) + lam p_A(x)``; equivalently a per-token mixture whose weights
  are the posterior over {B, A} given the sentence so far (Bayesian model averaging).
* ``geca``: the reference's formula, mixing whole-sentence scores with a natural-log
  ``logaddexp`` applied to log10 values (spec §10), parametrised by the ratio ``r``
  (A's weight r / (1 + r)). Kept to reproduce the paper's numbers; it is not a proper
  mixture of the two distributions.

The weight is chosen on the validation corpus (lowest perplexity); the test figures of
every weight are reported, with a paired t-test of per-sentence NLL against the base.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
import polars as pl

from compgen.errors import SettingError
from compgen.io import atomic_open
from compgen.lm.kenlm_tools import resolve_corpus
from compgen.lm.scorer import NgramScorer
from compgen.lm.scores import (  # noqa: F401  (re-exported: the module's public names)
    DEFAULT_WEIGHTS,
    LN10,
    MIXES,
    CorpusScores,
    aug_weight,
    base_nll,
    load_model,
    mix,
    mix_geca,
    mix_sentence,
    mix_token,
    perplexity,
    read_sentences,
    score_corpus,
)
from compgen.lm.vocabulary import OovCounts

# ---------------------------------------------------------------------------- t-test

def _beta_continued_fraction(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz evaluation)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            h *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta function I_x(a, b) for a, b > 0, 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                 + a * math.log(x) + b * math.log1p(-x))
    # The fraction converges fast only below the mean; use the symmetry I_x(a,b) = 1 - I_{1-x}(b,a).
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def student_t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom."""
    if math.isnan(t):
        return float("nan")
    return betainc(df / 2.0, 0.5, df / (df + t * t))


def paired_t_test(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """Paired t statistic of ``a - b`` and its two-sided p-value. Identical samples give
    (0, 1); fewer than two pairs give NaNs."""
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    n = d.size
    if n < 2:
        return float("nan"), float("nan")
    sd = float(d.std(ddof=1))
    mean = float(d.mean())
    if sd == 0.0:
        return (0.0, 1.0) if mean == 0.0 else (math.copysign(math.inf, mean), 0.0)
    t = mean / (sd / math.sqrt(n))
    return t, student_t_two_sided_p(t, n - 1)


# ---------------------------------------------------------------------------- evaluation

@dataclass
class LmEval:
    rows: list[dict]          # one per weight: mix, weight, aug_weight, val_ppl, test_ppl, ...
    chosen: int               # index of the weight with the lowest validation perplexity
    n_tokens: dict            # split -> token count used for perplexity
    oov: dict | None = None   # split -> vocabulary.OovCounts (how unknown words were counted)

    @property
    def best(self) -> dict:
        return self.rows[self.chosen]


def parse_weights(text: str | None, mode: str) -> list[float]:
    if text is None or not text.strip():
        return list(DEFAULT_WEIGHTS[mode])
    try:
        weights = [float(w) for w in text.split(",") if w.strip()]
    except ValueError:
        raise SettingError(f"`weights` must be comma-separated numbers (got {text!r})") from None
    if not weights or any(not math.isfinite(w) for w in weights):
        raise SettingError(f"`weights` must be comma-separated finite numbers (got {text!r})")
    return weights


def evaluate_scores(base: dict[str, CorpusScores], aug: dict[str, CorpusScores] | None,
                    weights: list[float], mode: str) -> LmEval:
    """Rows of val/test perplexity per weight from pre-computed scores (split -> scores).
    Without ``aug`` only the base row is produced."""
    if mode not in MIXES:
        raise SettingError(f"`mix` must be one of {', '.join(MIXES)} (got {mode!r})")
    if aug is None:
        weights = [0.0]
    base_test = base_nll(base["test"])
    rows = []
    for weight in weights:
        nll = {split: mix(mode, base[split], aug[split] if aug else None, weight)
               for split in ("val", "test")}
        t, p = paired_t_test(nll["test"], base_test)
        rows.append({
            "mix": mode, "weight": weight, "aug_weight": aug_weight(mode, weight),
            "val_ppl": perplexity(nll["val"], base["val"].n_tokens),
            "test_ppl": perplexity(nll["test"], base["test"].n_tokens),
            "t": t, "p": p,
        })
    base_ppl = perplexity(base_test, base["test"].n_tokens)
    for row in rows:
        row["test_delta"] = row["test_ppl"] - base_ppl
    chosen = min(range(len(rows)), key=lambda i: (rows[i]["val_ppl"], i))
    for i, row in enumerate(rows):
        row["chosen"] = i == chosen
    return LmEval(rows, chosen, {s: base[s].n_tokens for s in ("val", "test")})


def score_pair(base_path, aug_path, corpora: dict[str, str | os.PathLike],
               settings: tuple[str | None, str | None] = ("base", "aug")):
    """Scores of both models on every corpus over one vocabulary, the base model's
    (see ``vocabulary.py``): (base scores, mapped aug scores, split -> OovCounts)."""
    scorer = NgramScorer(base_path, aug_path, settings=settings)
    base_scores, aug_scores, oov = {}, {}, {}
    for split, path in corpora.items():
        base_scores[split], aug_scores[split], oov[split] = scorer.corpus_scores(
            read_sentences(path))
    return base_scores, aug_scores, oov


def score_splits(model_path, corpora: dict[str, str | os.PathLike], setting: str
                 ) -> dict[str, CorpusScores]:
    scorer = NgramScorer(model_path, settings=(setting, setting))
    return {split: scorer.corpus_scores(read_sentences(path))[0]
            for split, path in corpora.items()}


def evaluate(base: str | os.PathLike, val: str | os.PathLike, test: str | os.PathLike,
             aug: str | os.PathLike | None = None, weights: list[float] | None = None,
             mode: str = "token", data_dir=None) -> LmEval:
    """Perplexity of ``base`` (and its interpolation with ``aug`` for every weight) on the
    validation and test corpora (files, or ``lm/<lang>`` = that corpus's val/test split)."""
    if mode not in MIXES:
        raise SettingError(f"`mix` must be one of {', '.join(MIXES)} (got {mode!r})")
    corpora = {"val": resolve_corpus(val, "val", data_dir), "test": resolve_corpus(test, "test", data_dir)}
    if aug is None:
        base_scores, aug_scores = score_splits(base, corpora, "base"), None
        oov = {split: _base_oov(scores) for split, scores in base_scores.items()}
    else:
        base_scores, aug_scores, oov = score_pair(base, aug, corpora)
    result = evaluate_scores(base_scores, aug_scores,
                             weights if weights is not None else list(DEFAULT_WEIGHTS[mode]), mode)
    result.oov = oov
    return result


def _base_oov(scores: CorpusScores):
    return OovCounts(scores.n_tokens, int(scores.oov.sum()), 0, 1)


# ---------------------------------------------------------------------------- tables

COLUMNS = ("mix", "weight", "aug_weight", "val_ppl", "test_ppl", "test_delta", "t", "p", "chosen")


def format_cell(key: str, value) -> str:
    if isinstance(value, bool):
        return "*" if value else ""
    if isinstance(value, float):
        if key in ("p",):
            return f"{value:.3g}"
        if key in ("weight", "aug_weight"):
            return f"{value:g}" if key == "weight" else f"{value:.4f}"
        if key == "test_delta":
            return f"{value:+.2f}"
        return f"{value:.2f}"
    return str(value)


def rows_markdown(rows: list[dict], columns=COLUMNS) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(format_cell(c, row[c]) for c in columns) + " |")
    return "\n".join(lines) + "\n"


def write_rows(rows: list[dict], csv: str | os.PathLike | None = None,
               markdown: str | os.PathLike | None = None, header: str = "") -> None:
    """Write the rows as CSV and/or Markdown (atomically)."""
    if csv:
        frame = pl.DataFrame([{c: row[c] for c in COLUMNS} for row in rows])
        with atomic_open(csv, "w", encoding="utf-8") as out:
            out.write(frame.write_csv())
    if markdown:
        with atomic_open(markdown, "w", encoding="utf-8") as out:
            out.write(header + rows_markdown(rows))
