"""The one teacher-forcing loop: step t is fed the gold token t and scores token t + 1, the
runtime's state carried from step to step."""

import numpy as np
import torch

from compgen.data.vocab import BOS_ID, PAD_ID
from compgen.decoding.teacher_forcing import rows_target, teacher_forced_logp


def markov_step(table: np.ndarray):
    """A runtime whose log-probabilities depend on the token fed and on the step count it
    carries as its state."""
    def step(token, state):
        return table[np.asarray(token)] + state, state + 1
    return step


def test_each_step_is_fed_the_gold_token_and_carries_the_state():
    rng = np.random.default_rng(0)
    table = rng.normal(size=(6, 6)).astype(np.float32)
    target = np.array([[BOS_ID, 4, 5, 3], [BOS_ID, 5, 4, PAD_ID]])
    logp = teacher_forced_logp(markov_step(table), target, state=0)
    assert logp.shape == (2, 3, 6)
    for t in range(3):
        np.testing.assert_array_equal(logp[:, t], table[target[:, t]] + t)


def test_tensor_targets_and_outputs_read_as_arrays():
    table = torch.arange(36, dtype=torch.float32).reshape(6, 6)
    target = torch.tensor([[BOS_ID, 4, 5]])
    logp = teacher_forced_logp(lambda token, state: (table[token], state), target)
    np.testing.assert_array_equal(logp, table[target[:, :2]].numpy())


def test_rows_target_starts_with_bos_and_pads_to_the_longest_row():
    target = rows_target([(4, 5, 3), (5,)])
    assert target.tolist() == [[BOS_ID, 4, 5, 3], [BOS_ID, 5, PAD_ID, PAD_ID]]
