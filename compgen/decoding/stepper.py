"""The step function every search drives, whatever computes it (eager PyTorch, TorchScript,
ONNX Runtime, a GPU behind the host)."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Stepper(Protocol):
    """A backend's step function over a batch it keeps (decoder state and encoder memory).

    The caller starts it on its own inputs (a generator's ``start(protos, z)``, a
    predictor's ``start(source)``); a search then only steps and selects rows."""

    def step(self, token: np.ndarray) -> np.ndarray:
        """Feed ``(N,)`` tokens; the next token's scores ``(N, V)`` float32 (log p, or
        logits where the search normalises them)."""

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        """Keep (and reorder) these rows of the state, and of the memory if asked (a
        beam's rows of one source share the memory, so a reorder within them skips it)."""
