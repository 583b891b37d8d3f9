"""Teacher forcing: the log-probability a model gives each step of a known output, the
gold token fed back at every step instead of its own choice. One loop for every model
kind and runtime (eager PyTorch, ONNX Runtime; the TorchScript graphs carry their own,
scripted): the export parity checks compare these per-step log-probabilities, the near-tie
check sums them along decoded rows, direct inference rescores candidates with them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from compgen.data.vocab import BOS_ID, PAD_ID

# step(token column (B,), state) -> (log-probabilities (B, V), next state); the state is
# whatever the runtime carries between steps (None for a stepper that keeps its own)
Step = Callable[[object, object], tuple[object, object]]


def teacher_forced_logp(step: Step, target, state=None) -> np.ndarray:
    """Per-step log-probabilities ``(B, L-1, V)`` of ``target`` ``(B, L)``, whose first
    column is ``<s>``: step t is fed ``target[:, t]`` and scores ``target[:, t + 1]``.
    ``target`` is a NumPy array or a tensor, whichever ``step`` takes; ``step``'s outputs
    may be either (a tensor is read without a copy)."""
    steps = []
    for t in range(target.shape[1] - 1):
        logp, state = step(target[:, t], state)
        steps.append(np.asarray(logp))
    return np.stack(steps, 1)


def rows_target(rows: Sequence[Sequence[int]]) -> np.ndarray:
    """``<s> row`` padded to the longest row plus one: the target that teacher-forces
    decoded ``rows`` (each ends with its ``</s>`` where it has one)."""
    width = max((len(row) for row in rows), default=0) + 1
    target = np.full((len(rows), width), PAD_ID, dtype=np.int64)
    target[:, 0] = BOS_ID
    for b, row in enumerate(rows):
        target[b, 1: len(row) + 1] = row
    return target
