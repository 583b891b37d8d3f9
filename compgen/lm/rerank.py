"""N-gram scores inside sampling: an ``lm_logprob`` column, a minimum-score filter, and
the order in which the N most probable candidates are kept.

* ``lm_logprob``: log10 probability of one side of the sample (``y``, ``x`` or
  ``x <sep> y``) under the scorer (``scorer.py``: base model, or base mixed with the
  GECA-augmented model).
* ``--min-lm-logprob``: candidates below it are rejected as they are decoded, like any
  other filter, so they do not count towards ``nsamples``.
* ``--rerank``: ``model`` keeps the N of highest generator log-probability (natural log,
  the default, unchanged), ``lm`` those of highest ``lm_logprob``, ``sum`` those of
  highest ``logprob + lm_logprob * ln 10`` (both in nats: the product of the two
  probabilities). Scores are compared rounded to 1e-4 (``compgen.decoding.contract.rank_key``);
  ties keep the decoding order.

The Python backends score with the kenlm module through this class; the C++ runner does
the same inside its process (``cpp_runner/src/lm_ranking.hpp``, given ``runner_job``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from compgen.decoding.contract import rank_key
from compgen.errors import SettingError
from compgen.lm.model_file import checked_model_file
from compgen.lm.scorer import SIDES, NgramScorer, side_text
from compgen.lm.scores import read_sentences

if TYPE_CHECKING:
    from compgen.data.files import Fields

RERANKS = ("model", "lm", "sum")


@dataclass
class LmRanking:
    scorer: NgramScorer
    side: str = "y"
    rerank: str = "model"
    min_logprob: float | None = None
    cache: dict = field(default_factory=dict)   # (x, y) tuples -> lm_logprob
    weight_choice: str | None = None   # how --lm-val chose the weight, for the log

    @classmethod
    def from_options(cls, lm: str | None, weight: float | None = None, side: str = "y",
                     mix: str = "token", rerank: str = "model",
                     min_logprob: float | None = None, val: str | None = None,
                     data_dir=None, fields: Fields | None = None) -> LmRanking | None:
        """Check the options and load the models (a missing or corrupt file is a
        UserError here, before anything is decoded); ``val``'s pairs are read with
        ``fields``. None without ``--lm``."""
        if rerank not in RERANKS:
            raise SettingError(f"`rerank` {rerank}: unknown (valid: {', '.join(RERANKS)})")
        if side not in SIDES:
            raise SettingError(f"`lm_side` {side}: unknown (valid: {', '.join(SIDES)})")
        if lm is None:
            for name, given in (("`lm_weight`", weight is not None), ("`lm_val`", val),
                                ("`min_lm_logprob`", min_logprob is not None),
                                (f"`rerank` {rerank}", rerank != "model")):
                if given:
                    raise SettingError(f"{name} needs `lm` BASE[,AUG]")
            return None
        if min_logprob is not None and not math.isfinite(min_logprob):
            raise SettingError(f"`min_lm_logprob` {min_logprob}: must be a finite log10 value")
        scorer = NgramScorer.from_spec(lm, mix, weight)
        if scorer.aug is not None and weight is None:
            if val is None:
                raise SettingError("`lm` BASE,AUG: give the mixture weight (`lm_weight`) or a "
                                   "validation corpus to choose it on (`lm_val`)")
            sentences = validation_sentences(val, side, data_dir, fields)
            table = scorer.choose_weight(sentences)
            source = ("one sentence per line" if Path(val).suffix == ".txt" else
                      f"every row's {side} side" if Path(val).is_file() else
                      f"the train split's {side} side")
            choice = (f"--lm-val {val}: {source}, {len(sentences):,} sentences; perplexity by "
                      f"{mix} weight: " + ", ".join(f"{w:g} {p:.4g}" for w, p in table.items())
                      + f" -> weight {scorer.weight:g}")
            return cls(scorer, side, rerank, min_logprob, weight_choice=choice)
        elif val is not None:
            raise SettingError("`lm_val` chooses the weight of an augmented model: "
                               "`lm` BASE,AUG without `lm_weight`")
        return cls(scorer, side, rerank, min_logprob)

    def describe(self) -> str:
        models = self.scorer.base_path.name + (
            f" + {self.scorer.aug_path.name} ({self.scorer.mix} mix, weight "
            f"{self.scorer.weight:g})" if self.scorer.aug is not None else "")
        return f"LM {models}, side {self.side}, rerank {self.rerank}"

    def runner_args(self) -> list[str]:
        """``compgen-lm-score``'s options for the same scores (cpp_runner/src/kenlm_scorer.hpp)."""
        scorer = self.scorer
        spec = str(scorer.base_path) + (f",{scorer.aug_path}" if scorer.aug is not None else "")
        return ["--lm", spec, "--lm-weight", repr(scorer.weight), "--lm-mix", scorer.mix,
                "--lm-side", self.side, "--lm-shared-by", str(scorer.shared_by)]

    def runner_job(self) -> dict:
        """The sampling runner's job lines for the same scores, floor and order
        (cpp_runner/src/lm_ranking.hpp); the weight is the one chosen here. The runner
        opens the files the scorer loaded: a recorded model's checked private copy."""
        scorer = self.scorer
        job = {"lm_base": checked_model_file(scorer.base_path).resolve()}
        if scorer.aug is not None:
            job["lm_aug"] = checked_model_file(scorer.aug_path).resolve()
        job.update(lm_mix=scorer.mix, lm_weight=repr(scorer.weight), lm_side=self.side,
                   lm_shared_by=scorer.shared_by, rerank=self.rerank)
        if self.min_logprob is not None:
            job["min_lm_logprob"] = repr(float(self.min_logprob))
        return job

    # ------------------------------------------------------------------ scores

    def scores(self, pairs) -> list[float]:
        """lm_logprob of every (x, y) pair; unseen pairs are scored in one call."""
        keys = [(tuple(x), tuple(y)) for x, y in pairs]
        missing = list(dict.fromkeys(k for k in keys if k not in self.cache))
        if missing:
            values = self.scorer.score([side_text(x, y, self.side) for x, y in missing])
            self.cache.update(zip(missing, values.tolist()))
        return [self.cache[k] for k in keys]

    def filtered(self, accept: Callable) -> Callable:
        """``accept`` that also rejects pairs below ``min_logprob`` (unchanged without)."""
        if self.min_logprob is None:
            return accept

        def accept_above(tokens):
            pair = accept(tokens)
            if pair is None or self.scores([pair])[0] < self.min_logprob:
                return None
            return pair
        return accept_above

    def rank_score(self, sample) -> float:
        """What the ``rerank`` order compares (higher is better)."""
        if self.rerank == "lm":
            return sample.lm_logprob
        if self.rerank == "sum":
            return sample.logprob + sample.lm_logprob * math.log(10.0)
        return sample.logprob

    def keep(self, samples: list, n: int) -> list:
        """The ``n`` best of the accepted samples (given in decoding order) in the
        ``rerank`` order, each with ``lm_logprob`` set (``collect_decoded``'s ``keep``)."""
        for sample, score in zip(samples, self.scores([(s.x, s.y) for s in samples])):
            sample.lm_logprob = score
        return sorted(samples, key=lambda s: rank_key(self.rank_score(s)))[:n]


def validation_sentences(val: str, side: str, data_dir=None,
                         fields: Fields | None = None) -> list[str]:
    """--lm-val: a corpus file (one sentence per line, ``.txt``) or data whose ``side`` of
    the pairs is read (a data set's train split, a data file read with ``fields``, a
    samples TSV)."""
    # start-up: the GECA package and polars load only to build a side corpus
    from compgen.data.dataset import open_dataset
    from compgen.lm.side_corpus import training_pairs

    if Path(val).suffix == ".txt":
        return read_sentences(val)
    return [side_text(x, y, side) for x, y in training_pairs(open_dataset(val, data_dir, fields))]


def sample_columns(samples: list) -> dict[str, list[float]]:
    """Score columns of a samples TSV: logprob, and lm_logprob when an LM scored them."""
    columns = {"logprob": [s.logprob for s in samples]}
    if samples and getattr(samples[0], "lm_logprob", None) is not None:
        columns["lm_logprob"] = [s.lm_logprob for s in samples]
    return columns
