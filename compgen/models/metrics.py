"""Scoring predictions as the reference does, and greedy/beam prediction with a predictor.

Metrics (reference ``seqseqatt.jl``, spec §6.4):

* Predictions are greedy, ``max_len`` (45) steps, cut at the first ``</s>``; a
  prediction that used all 45 steps without ``</s>`` loses its last token.
* References are truncated like the model's training targets: a reference longer than
  45 tokens has no ``</s>``, so it is compared on its first 44 tokens only (SCAN: 56 jump
  and 96 around_right test outputs). Consequence kept on purpose: a reference of
  *exactly* 45 tokens can never be matched (the prediction has at most 44).
* Units compared: SCAN = action tokens. Morphology (``eval_units``): if the token list
  has a token made entirely of uppercase letters / numerals, it is split at the first
  token whose *first* character is uppercase or numeric; the part before is joined into
  ONE lemma string and every tag is one unit: ``[lemma, tag1, tag2, ...]``; otherwise
  the raw character list is used.
* Exact match = fraction of identical unit lists.
* Micro F1 over the whole set: ``tp += #{p in pred : p in ref}``, ``fp += #{p in pred :
  p not in ref}``, ``fn += #{r in ref : r not in pred}`` (membership tests, so repeated
  predicted units each count), ``P = tp/(tp+fp)``, ``R = tp/(tp+fn)``, F1 = 0 if P or R
  is 0, else ``2PR/(P+R)``. As in the reference, 0/0 is NaN: a set where every
  prediction AND every reference is empty scores NaN (if only the predictions are empty,
  R = 0 and F1 = 0). That is the F1 of morphology (units: a lemma and its tags).
* Other data (SCAN, semantic parsing, a user's pairs): token F1, the same micro F1 over
  token *multisets* (``tp`` = the tokens prediction and reference share, each as often
  as both have it). Membership counting would give a prediction that repeats one right
  token a high score (``SELECT SELECT SELECT`` against any SQL query).
"""

from __future__ import annotations

import math
import unicodedata
from collections import Counter
from collections.abc import Sequence

from compgen.models.seq2seq import (
    PredictorStepper,
    predict_sources,
    predictor_rules,
    search_rows,
)

# ------------------------------------------------------------------ metrics

def _upper_or_numeric(c: str) -> bool:
    cat = unicodedata.category(c)
    return cat in ("Lu", "Lt") or cat.startswith("N")


def eval_units(tokens: Sequence[str], morphology: bool) -> list[str]:
    """The units one prediction/reference is scored on (module doc)."""
    tokens = list(tokens)
    if not morphology or not any(all(map(_upper_or_numeric, t)) for t in tokens):
        return tokens
    k = next(i for i, t in enumerate(tokens) if t and _upper_or_numeric(t[0]))
    return ["".join(tokens[:k])] + tokens[k:]


def reference_view(ref: Sequence[str], max_len: int) -> list[str]:
    """A reference as the reference code compares it: longer than max_len -> the first
    max_len - 1 tokens (its truncated target has no </s> and loses its last token)."""
    ref = list(ref)
    return ref if len(ref) <= max_len else ref[: max_len - 1]


def exact_match(preds: Sequence[Sequence[str]], refs: Sequence[Sequence[str]]) -> float:
    if not preds:
        return math.nan
    return sum(list(p) == list(r) for p, r in zip(preds, refs)) / len(preds)


def micro_f1(preds: Sequence[Sequence[str]], refs: Sequence[Sequence[str]]) -> float:
    """Micro F1 over unit lists, exactly as the reference counts (module doc)."""
    tp = fp = fn = 0
    for pred, ref in zip(preds, refs):
        ref_set, pred_set = set(ref), set(pred)
        hits = sum(p in ref_set for p in pred)
        tp, fp = tp + hits, fp + len(pred) - hits
        fn += sum(r not in pred_set for r in ref)
    precision = tp / (tp + fp) if tp + fp else math.nan
    recall = tp / (tp + fn) if tp + fn else math.nan
    if precision == 0 or recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)  # NaN stays NaN, as in Julia


def token_f1(preds: Sequence[Sequence[str]], refs: Sequence[Sequence[str]]) -> float:
    """Micro F1 over token multisets (module doc); 0/0 is NaN as in ``micro_f1``."""
    tp = fp = fn = 0
    for pred, ref in zip(preds, refs):
        shared = sum((Counter(pred) & Counter(ref)).values())
        tp, fp, fn = tp + shared, fp + len(pred) - shared, fn + len(ref) - shared
    precision = tp / (tp + fp) if tp + fp else math.nan
    recall = tp / (tp + fn) if tp + fn else math.nan
    if precision == 0 or recall == 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def score_predictions(preds: Sequence[Sequence[str]], refs: Sequence[Sequence[str]],
                      morphology: bool, max_len: int = 45) -> dict:
    """-> {n, exact_match, f1, correct (per example)}."""
    p_units = [eval_units(p, morphology) for p in preds]
    r_units = [eval_units(reference_view(r, max_len), morphology) for r in refs]
    correct = [p == r for p, r in zip(p_units, r_units)]
    f1 = micro_f1(p_units, r_units) if morphology else token_f1(p_units, r_units)
    return {"n": len(preds), "exact_match": exact_match(p_units, r_units), "f1": f1,
            "correct": correct}


# ------------------------------------------------------------------ prediction

def predict(model, vocab, sources: Sequence[Sequence[str]], batch_size: int = 256,
            beam_width: int = 0) -> list[list[str]]:
    """Greedy (or beam, ``beam_width > 1``) predictions as token lists. Sources are
    batched by length (the encoder is batch-independent, so order does not matter)."""
    model.eval()
    decode = search_rows(PredictorStepper(model), predictor_rules(model.vocab_size), beam_width,
                         model.cfg.max_len)
    return predict_sources(decode, vocab, sources, batch_size, model.cfg.max_len)
