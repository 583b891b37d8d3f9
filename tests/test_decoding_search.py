"""The decoding core on its own: the samplers (``decoding/samplers.py``) and the greedy and
beam searches (``decoding/search.py``), driven by a small Markov stepper whose every
sequence's log-probability can be enumerated, so each search is checked against brute force."""

import itertools

import numpy as np
import pytest

from compgen.decoding.contract import StepRules
from compgen.decoding.random_stream import uniform
from compgen.decoding.samplers import Argmax, ForcedPrefix, Mixed, Temperature, draw_tokens
from compgen.decoding.search import BeamSearch, GreedySearch, best_candidates, search_for

PAD, BOS, EOS, SEP = 0, 1, 2, 3
V = 7
RULES = StepRules(vocab_size=V, bos=BOS, eos=EOS, pad=PAD, sep=SEP,
                  first_step_masked=(PAD, BOS, EOS), later_steps_masked=(PAD, BOS))


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


class MarkovStepper:
    """Row ``r``'s next-token log-probs depend on its previous token only:
    ``table[r, previous]``; ``take`` reorders (or repeats) the rows, as a real stepper's
    state would be."""

    def __init__(self, batch: int, seed: int):
        self.table = log_softmax(np.random.default_rng(seed).normal(0, 2, (batch, V, V)))
        self.rows = np.arange(batch)

    def step(self, token: np.ndarray) -> np.ndarray:
        return self.table[self.rows, token].astype(np.float32)

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        self.rows = self.rows[rows]


def masked(logp: np.ndarray, first: bool) -> np.ndarray:
    return np.where(RULES.masked(first), -np.inf, logp)


def sequence_logp(table: np.ndarray, seq) -> float:
    """Sum of the masked log-probs of ``seq`` (ending at ``</s>`` or not) under one row's
    table."""
    total, prev = 0.0, BOS
    for t, tok in enumerate(seq):
        total += masked(table[prev], t == 0)[tok]
        prev = tok
    return total


def test_argmax_takes_the_lowest_id_among_equals():
    logp = np.log(np.array([[0.1, 0.4, 0.4, 0.1], [0.25, 0.25, 0.25, 0.25]]))
    assert Argmax().choose(logp, 0, np.arange(2), np.zeros(2, bool)).tolist() == [1, 0]


def test_draw_tokens_follows_softmax_over_a_grid_of_uniforms():
    """Over evenly spaced u, each token is drawn in proportion to softmax(logp / T); a
    masked token never."""
    logp = np.array([[np.log(0.5), np.log(0.2), -np.inf, np.log(0.3)]])
    n = 10_000
    u = (np.arange(n) + 0.5) / n
    for temperature in (1.0, 0.5, 2.0):
        drawn = draw_tokens(np.repeat(logp, n, 0), temperature, u)
        freq = np.bincount(drawn, minlength=4) / n
        p = np.exp(np.where(np.isinf(logp[0]), -np.inf, logp[0] / temperature))
        p /= p.sum()
        assert freq[2] == 0
        np.testing.assert_allclose(freq, p, atol=2 / n)


def test_temperature_draws_depend_on_seed_sample_and_step_not_on_the_batch():
    logp = log_softmax(np.random.default_rng(0).normal(size=(6, V)))
    sampler = Temperature(0.8, seed=11)
    ids = np.array([5, 9, 2, 40, 7, 3])
    drawn = sampler.choose(logp, 4, ids, np.zeros(6, bool))
    order = np.array([3, 0, 5, 1, 4, 2])
    again = sampler.choose(logp[order], 4, ids[order], np.zeros(6, bool))
    assert again.tolist() == drawn[order].tolist()
    # the draw is the inverse CDF of this (seed, sample, step)'s uniform
    assert drawn.tolist() == draw_tokens(logp, 0.8, uniform(11, ids, 4)).tolist()
    other_steps = [Temperature(0.8, seed=11).choose(logp, s, ids, np.zeros(6, bool)).tolist()
                   for s in range(8)]
    assert len({tuple(d) for d in other_steps}) > 1


def test_mixed_draws_before_sep_and_takes_the_argmax_after():
    logp = log_softmax(np.random.default_rng(1).normal(size=(8, V)))
    ids = np.arange(8)
    after = np.array([False, True] * 4)
    mixed = Mixed(1.5, seed=3).choose(logp, 2, ids, after)
    drawn = Temperature(1.5, seed=3).choose(logp, 2, ids, after)
    assert mixed[after].tolist() == logp.argmax(1)[after].tolist()
    assert mixed[~after].tolist() == drawn[~after].tolist()


def test_forced_prefix_writes_each_rows_prefix_then_the_argmax():
    logp = log_softmax(np.random.default_rng(2).normal(size=(3, V)))
    prefix = np.array([[4, 5, 6], [6, 6, 0], [5, 0, 0]])
    sampler = ForcedPrefix(prefix, np.array([3, 2, 1]))
    ids = np.array([0, 1, 2])
    greedy = logp.argmax(1)
    assert sampler.choose(logp, 0, ids, None).tolist() == [4, 6, 5]
    assert sampler.choose(logp, 1, ids, None).tolist() == [5, 6, greedy[2]]
    assert sampler.choose(logp, 3, ids, None).tolist() == greedy.tolist()


def python_greedy(table: np.ndarray, max_len: int) -> list[int]:
    seq, prev = [], BOS
    for t in range(max_len):
        tok = int(masked(table[prev], t == 0).argmax())
        seq.append(tok)
        if tok == EOS:
            break
        prev = tok
    return seq


@pytest.mark.parametrize("compact", [True, False])
def test_greedy_search_is_the_step_by_step_argmax(compact):
    B, L = 16, 6
    stepper = MarkovStepper(B, seed=4)
    tokens, token_logp = GreedySearch(compact=compact).best(stepper, RULES, B, L)
    for row in range(B):
        want = python_greedy(stepper.table[row], L)
        assert tokens[row, :len(want)].tolist() == want
        assert (tokens[row, len(want):] == PAD).all()  # filler after </s>
        np.testing.assert_allclose(token_logp[row].sum(),
                                   sequence_logp(stepper.table[row], want), rtol=1e-5)


def test_greedy_search_with_a_sampler_keys_draws_by_sample_id():
    """Decoding rows in another order, with their sample ids, gives each row its tokens."""
    B, L = 12, 8
    search = search_for("temperature", temperature=1.3, seed=5)
    ids = np.arange(100, 100 + B)
    tokens, _ = search.best(MarkovStepper(B, seed=6), RULES, B, L, sample_ids=ids)
    order = np.random.default_rng(7).permutation(B)
    stepper = MarkovStepper(B, seed=6)
    stepper.take(order)
    shuffled, _ = search.best(stepper, RULES, B, L, sample_ids=ids[order])
    width = min(tokens.shape[1], shuffled.shape[1])
    assert shuffled[:, :width].tolist() == tokens[order][:, :width].tolist()


def test_greedy_search_stops_a_row_whose_input_is_rejected():
    """``stop_input`` sees the ids before the first ``<sep>``; a rejected row ends there."""
    B, L = 32, 8
    seen = []

    def reject_all(x_ids):
        seen.append(tuple(x_ids))
        return True

    stepper = MarkovStepper(B, seed=8)
    free, _ = GreedySearch().best(MarkovStepper(B, seed=8), RULES, B, L)
    stopped, _ = GreedySearch(stop_input=reject_all).best(stepper, RULES, B, L)
    for row in range(B):
        seq = free[row].tolist()
        if SEP in seq and seq.index(SEP) < (seq.index(EOS) if EOS in seq else L):
            cut = seq.index(SEP) + 1
            assert stopped[row, :cut].tolist() == seq[:cut]
            assert (stopped[row, cut:] == PAD).all()
            assert tuple(seq[:cut - 1]) in seen
        else:  # a row that never writes <sep> before </s> is decoded as without the filter
            width = min(stopped.shape[1], L)
            assert stopped[row, :width].tolist() == free[row, :width].tolist()


def all_sequences(max_len: int):
    """Every token sequence the rules allow: ending at ``</s>``, or ``max_len`` long."""
    first = [t for t in range(V) if not RULES.masked(True)[t]]
    later = [t for t in range(V) if not RULES.masked(False)[t]]
    for length in range(1, max_len + 1):
        for seq in itertools.product(first, *[later] * (length - 1)):
            ended = [i for i, t in enumerate(seq) if t == EOS]
            if (ended and ended[0] == length - 1) or (not ended and length == max_len):
                yield list(seq)


def test_a_wide_beam_finds_the_most_probable_sequence():
    """With room for every hypothesis, the beam's best is the brute-force maximum and its
    hypotheses come best first."""
    B, L = 3, 3
    stepper = MarkovStepper(B, seed=9)
    tables = stepper.table.copy()
    tokens, token_logp, scores = BeamSearch(width=V ** L).hypotheses(stepper, RULES, B, L)
    for row in range(B):
        best = max(sequence_logp(tables[row], s) for s in all_sequences(L))
        np.testing.assert_allclose(scores[row, 0], best, rtol=1e-5)
        seq = tokens[row, 0].tolist()
        seq = seq[:seq.index(EOS) + 1] if EOS in seq else seq
        np.testing.assert_allclose(sequence_logp(tables[row], seq), best, rtol=1e-5)
        finite = scores[row][np.isfinite(scores[row])]
        assert (np.diff(finite) <= 1e-6).all()
        np.testing.assert_allclose(token_logp[row, 0].sum(), scores[row, 0], rtol=1e-5)


def test_a_beam_of_one_is_greedy():
    B, L = 10, 7
    greedy, greedy_logp = GreedySearch(compact=False).best(MarkovStepper(B, seed=10), RULES, B, L)
    beam, beam_logp = BeamSearch(width=1).best(MarkovStepper(B, seed=10), RULES, B, L)
    width = greedy.shape[1]
    assert beam[:, :width].tolist() == greedy.tolist()
    np.testing.assert_allclose(beam_logp[:, :width], greedy_logp, rtol=1e-6)


def test_best_candidates_rank_by_score_then_lower_index():
    rng = np.random.default_rng(11)
    cand = rng.integers(0, 4, (50, 30)).astype(np.float64)  # many ties
    for width in (1, 3, 8, 30, 40):
        got = best_candidates(cand, width)
        want = np.argsort(-cand, axis=1, kind="stable")[:, :width]
        assert got.tolist() == want.tolist()


def test_search_for_maps_each_strategy_to_its_search():
    assert isinstance(search_for("beam", beam_width=3), BeamSearch)
    assert search_for("beam", beam_width=3).width == 3
    assert isinstance(search_for("greedy").sampler, Argmax)
    temperature = search_for("temperature", temperature=0.7, seed=2).sampler
    assert type(temperature) is Temperature and temperature == Temperature(0.7, 2)
    assert type(search_for("mixed", temperature=0.7, seed=2).sampler) is Mixed
    with pytest.raises(Exception, match="nucleus"):
        search_for("nucleus")
