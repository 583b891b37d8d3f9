"""Search strategies over a started ``Stepper``: ``GreedySearch`` (one hypothesis per row,
a sampler picks each token) and ``BeamSearch`` (``width`` hypotheses per row, no length
normalisation). The generator, the predictor and their exports all decode with these two;
the inflection model's fairseq beam is ``fairseq_beam.FairseqBeamSearch``.

Both return per-token arrays: tokens ``(B, L)`` with a filler after ``</s>`` and each
emitted token's (masked) log-probability, ``L`` the steps the longest row needed.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from compgen.decoding.contract import BEAM_WIDTH, Contract, StepRules, check_strategy
from compgen.decoding.input_trie import InputTrie
from compgen.decoding.samplers import Argmax, Mixed, Temperature
from compgen.decoding.stepper import Stepper
from compgen.errors import SettingError


def _masked(logp: np.ndarray, mask: np.ndarray, value: np.float32) -> np.ndarray:
    return np.where(mask, value, logp)


class GreedySearch:
    """One hypothesis per row; ``sampler`` picks each step's token. Finished rows are
    compacted out of the batch (``compact``), or else fed ``<pad>`` and given
    ``finished_token`` (default ``<pad>``) at log p 0 until every row has finished."""

    def __init__(self, sampler=None, compact: bool = True, finished_token: int | None = None,
                 stop_input: Callable[[np.ndarray], bool] | None = None,
                 known_inputs: InputTrie | None = None):
        self.sampler = sampler or Argmax()
        self.compact, self.finished_token = compact, finished_token
        # stop_input(ids of x): True stops a row that has just written ``x <sep>`` (its
        # caller's filter rejects every datum with that input); a second ``<sep>`` stops a
        # row too (no filter keeps it). Compacted searches only: rows never interact, so
        # the rows that go on are decoded exactly as without it.
        self.stop_input = stop_input
        # known_inputs: a row's <sep> is masked while its input so far is one of these
        # (compgen.decoding.input_trie; the sampled distribution is described there)
        self.known_inputs = known_inputs

    def best(self, stepper: Stepper, rules: StepRules, batch: int, max_len: int,
             sample_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Tokens ``(B, L)`` and each token's log p ``(B, L)`` float32; ``sample_ids``
        key the sampler's random draws (default 0..B-1)."""
        B, L, compact = batch, max_len, self.compact
        ids = np.arange(B, dtype=np.int64) if sample_ids is None else np.asarray(sample_ids, np.int64)
        filler = rules.pad if self.finished_token is None else self.finished_token
        out = np.full((B, L), rules.pad, np.int64)
        out_logp = np.zeros((B, L), np.float32)
        rows = np.arange(B)                   # batch rows still decoding
        token = np.full(B, rules.bos, np.int64)
        after_sep = np.zeros(B, bool)
        done = np.zeros(B, bool)              # without compaction: rows past </s>
        first, later = rules.masked(True), rules.masked(False)
        value = np.float32(rules.masked_value)
        used = 0
        trie = self.known_inputs
        nodes = None if trie is None else trie.start(B)
        for t in range(L):
            logp = _masked(stepper.step(token), first if t == 0 else later, value)
            if trie is not None:
                logp[trie.closes_known(nodes), rules.sep] = value
            nxt = self.sampler.choose(logp, t, ids[rows], after_sep)
            chosen_logp = logp[np.arange(len(rows)), nxt]
            if not compact:
                chosen_logp = np.where(done, np.float32(0), chosen_logp)
                fed = np.where(done, rules.pad, nxt)
                nxt = np.where(done, filler, nxt)
            out[rows, t] = nxt
            out_logp[rows, t] = chosen_logp
            used = t + 1
            ended = nxt == rules.eos
            if compact and self.stop_input is not None:
                ended |= self._stopped(out, rows, nxt == rules.sep, after_sep, t)
            after_sep = after_sep | (nxt == rules.sep)
            if trie is not None:
                nodes = trie.advance(nodes, nxt)
            if compact:
                if ended.all():
                    break
                if ended.any():
                    live = ~ended
                    stepper.take(np.flatnonzero(live))
                    rows, nxt, after_sep = rows[live], nxt[live], after_sep[live]
                    if trie is not None:
                        nodes = nodes[live]
                token = nxt
            else:
                done |= ended
                if done.all():
                    break
                token = fed
        return out[:, :used], out_logp[:, :used]

    def _stopped(self, out, rows, sep, after_sep, t) -> np.ndarray:
        stop = sep & after_sep
        for i in np.flatnonzero(sep & ~after_sep):
            stop[i] = self.stop_input(out[rows[i], :t])
        return stop


class BeamSearch:
    """``width`` hypotheses per row, ranked by the sum of their tokens' log-probs (no
    length normalisation; ``score_dtype`` accumulates it); candidates are ranked by score,
    ties by the lower flat index (hypothesis * V + token). A finished hypothesis continues
    with ``finished_token`` (default ``<pad>``) at +0. The first step expands the start
    into the best ``width`` tokens."""

    def __init__(self, width: int = BEAM_WIDTH, finished_token: int | None = None,
                 score_dtype=np.float64):
        self.width, self.finished_token, self.score_dtype = width, finished_token, score_dtype

    def hypotheses(self, stepper: Stepper, rules: StepRules, batch: int, max_len: int
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Hypotheses ``(B, W, L)``, their per-token log-probs ``(B, W, L)`` and scores
        ``(B, W)``, best first. The stepper holds one row per source; it is expanded to
        ``W`` rows per source here (encoded once)."""
        B, W, V, L = batch, self.width, rules.vocab_size, max_len
        stepper.take(np.repeat(np.arange(B), W))
        finished_row = np.full(V, -np.inf, np.float32)
        finished_row[rules.pad if self.finished_token is None else self.finished_token] = 0.0
        scores = np.full((B, W), -np.inf, self.score_dtype)
        scores[:, 0] = 0.0  # one live hypothesis at the start
        parents, tokens, token_logp = [], [], []  # per step (B, W): followed back at the end
        done = np.zeros((B, W), bool)
        token = np.full(B * W, rules.bos, np.int64)
        offsets = (np.arange(B) * W)[:, None]
        first, later = rules.masked(True), rules.masked(False)
        value = np.float32(rules.masked_value)
        for t in range(L):
            logp = _masked(stepper.step(token), first if t == 0 else later, value)
            logp = np.where(done[..., None], finished_row, logp.reshape(B, W, V)).reshape(B, W * V)
            cand = (scores.reshape(B * W, 1) + logp.reshape(B * W, V).astype(self.score_dtype, copy=False))
            cand = cand.reshape(B, W * V)
            flat = best_candidates(cand, W)
            scores = np.take_along_axis(cand, flat, 1)
            parent, tok = flat // V, flat % V
            parents.append(parent)
            tokens.append(tok)
            token_logp.append(np.take_along_axis(logp, flat, 1))
            done = np.take_along_axis(done, parent, 1) | (tok == rules.eos)
            if done.all():
                break
            stepper.take((parent + offsets).ravel(), memory=False)  # parents share the memory
            token = tok.ravel()
        return (*_follow_back(B, W, parents, tokens, token_logp), scores)

    def best(self, stepper: Stepper, rules: StepRules, batch: int, max_len: int,
             sample_ids: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """The best hypothesis of every row, as ``GreedySearch.best``."""
        tokens, token_logp, _ = self.hypotheses(stepper, rules, batch, max_len)
        return tokens[:, 0], token_logp[:, 0]


def best_candidates(cand: np.ndarray, width: int) -> np.ndarray:
    """Flat indices of the ``width`` best candidates of each row ``(B, N)``, best first:
    by score, ties by the lower index (a stable sort of the row). Rows whose
    ``width``-th best score is not tied are sorted among their ``width`` best only."""
    if cand.shape[1] <= width:
        return np.argsort(-cand, axis=1, kind="stable")
    kth = np.partition(cand, cand.shape[1] - width, axis=1)[:, -width]
    at_least = cand >= kth[:, None]
    if not (at_least.sum(1) == width).all():  # a tie across the boundary
        return np.argsort(-cand, axis=1, kind="stable")[:, :width]
    chosen = np.nonzero(at_least)[1].reshape(-1, width)  # in index order
    order = np.argsort(-np.take_along_axis(cand, chosen, 1), axis=1, kind="stable")
    return np.take_along_axis(chosen, order, 1)


def _follow_back(B: int, W: int, parents: list, tokens: list, token_logp: list
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Hypotheses ``(B, W, L)`` and their tokens' log p from each step's parent pointers."""
    L = len(parents)
    hist = np.empty((B, W, L), np.int64)
    hist_lp = np.empty((B, W, L), np.float32)
    at = np.broadcast_to(np.arange(W), (B, W))
    for t in range(L - 1, -1, -1):
        hist[:, :, t] = np.take_along_axis(tokens[t], at, 1)
        hist_lp[:, :, t] = np.take_along_axis(token_logp[t], at, 1)
        at = np.take_along_axis(parents[t], at, 1)
    return hist, hist_lp


def search_for(strategy: str, temperature: float = 1.0, seed: int = 0,
               beam_width: int = BEAM_WIDTH, compact: bool = True,
               stop_input: Callable[[np.ndarray], bool] | None = None,
               known_inputs: InputTrie | None = None) -> GreedySearch | BeamSearch:
    """The search a ``--strategy`` names: greedy, temperature and mixed are a greedy
    search (``compact``, ``stop_input``, ``known_inputs``: see ``GreedySearch``) with the
    argmax, temperature or mixed sampler; beam is a beam search (its hypotheses compete:
    none is stopped early, no input masked)."""
    check_strategy(strategy)
    if strategy == "beam":
        if known_inputs is not None:
            raise SettingError("`novel_inputs`: greedy, temperature or mixed sampling only "
                               "(not `strategy` beam)")
        return BeamSearch(beam_width)
    if strategy == "greedy":
        return GreedySearch(Argmax(), compact, stop_input=stop_input, known_inputs=known_inputs)
    sampler = Temperature if strategy == "temperature" else Mixed
    return GreedySearch(sampler(temperature, seed), compact, stop_input=stop_input,
                        known_inputs=known_inputs)


def decode(stepper, contract: Contract, protos: np.ndarray, z: np.ndarray,
           search: GreedySearch | BeamSearch, sample_ids: np.ndarray | None = None,
           max_len: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """A generator's samples: start ``stepper`` on prototypes ``(B, K, T)`` and latents
    ``(B, Z)``, then the best hypothesis of ``search`` per row - tokens ``(B, L)``
    (``<pad>`` after ``</s>``) and each token's log p ``(B, L)`` float32."""
    stepper.start(protos, z)
    return search.best(stepper, contract, protos.shape[0], max_len or contract.max_len,
                       sample_ids)
