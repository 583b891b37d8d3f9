"""An exported predictor's ``model.ts`` as a step function of the decoding core
(``compgen.decoding``): its traced ``encoder`` once per source batch, its traced ``step``
once per time step; the search runs in Python, the same code as the other backends'."""

from __future__ import annotations

import numpy as np
import torch

from compgen.device import CPU, Device


class TorchScriptPredictor:
    def __init__(self, module: torch.jit.ScriptModule, device: Device | None = None):
        self.module, self.device = module, (device or CPU).torch

    @torch.no_grad()
    def start(self, source) -> None:
        keys, context, mask, onehot, h, c = self.module.encoder(
            torch.as_tensor(source).to(self.device))
        self.memory = (keys, context, mask, onehot)
        self.state = (h, c, torch.zeros_like(h))   # the first feed is zeros

    @torch.no_grad()
    def step(self, token: np.ndarray) -> np.ndarray:
        logp, *self.state = self.module.step(torch.from_numpy(token).to(self.device),
                                             *self.state, *self.memory)
        return logp.cpu().numpy()

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        index = torch.from_numpy(rows).to(self.device)
        self.state = [s[index] for s in self.state]
        if memory:
            self.memory = tuple(m[index] for m in self.memory)
