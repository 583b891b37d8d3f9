"""Samplers: how a greedy search picks each step's token from the masked log-probs.

The search strategy (``search``) and the sampler are separate pieces, as CTranslate2's
greedy search takes a best or a random sampler: ``Argmax`` (greedy), ``Temperature``
(a draw from softmax(logp / T)), ``Mixed`` (a draw until the row has emitted
``<sep>``, argmax after it) and ``ForcedPrefix`` (given first tokens, argmax after them). Random draws come from the counter-based stream
(``random_stream``) keyed by (seed, sample index, step), so a token does not depend on
the batch a sample is decoded in.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compgen.decoding.random_stream import uniform


def draw_tokens(logp: np.ndarray, temperature: float, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws from softmax(logp / T) (masked entries are -inf): p_i =
    exp(l_i/T - max) in double precision, summed in vocabulary order; the token is the
    first i whose running sum exceeds u times the total."""
    scaled = logp.astype(np.float64) / temperature
    weights = np.exp(scaled - scaled.max(1, keepdims=True))
    running = np.cumsum(weights, 1)  # sequential, in vocabulary order
    chosen = (running <= (u * running[:, -1])[:, None]).sum(1)
    return np.minimum(chosen, logp.shape[1] - 1)


class Argmax:
    """The most probable token (the lowest id among equals)."""

    def choose(self, logp: np.ndarray, step: int, sample_ids: np.ndarray,
               after_sep: np.ndarray) -> np.ndarray:
        return logp.argmax(1)


@dataclass(frozen=True)
class Temperature:
    """A draw from softmax(logp / temperature), keyed by (seed, sample index, step)."""
    temperature: float = 1.0
    seed: int = 0

    def choose(self, logp: np.ndarray, step: int, sample_ids: np.ndarray,
               after_sep: np.ndarray) -> np.ndarray:
        return draw_tokens(logp, self.temperature, uniform(self.seed, sample_ids, step))


@dataclass(frozen=True)
class Mixed(Temperature):
    """``Temperature`` until a row has emitted ``<sep>`` (the input side), ``Argmax`` after."""

    def choose(self, logp: np.ndarray, step: int, sample_ids: np.ndarray,
               after_sep: np.ndarray) -> np.ndarray:
        drawn = super().choose(logp, step, sample_ids, after_sep)
        return np.where(after_sep, logp.argmax(1), drawn)


@dataclass(frozen=True)
class ForcedPrefix:
    """Sample ``i``'s first ``lengths[i]`` tokens are ``prefix[i]`` ``(N, P)``; ``Argmax``
    after them (direct inference forces the input side of ``x <sep> y``)."""
    prefix: np.ndarray
    lengths: np.ndarray

    def choose(self, logp: np.ndarray, step: int, sample_ids: np.ndarray,
               after_sep: np.ndarray) -> np.ndarray:
        greedy = logp.argmax(1)
        if step >= self.prefix.shape[1]:
            return greedy
        forced = step < self.lengths[sample_ids]
        return np.where(forced, self.prefix[sample_ids, step], greedy)
