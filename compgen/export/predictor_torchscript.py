"""TorchScript export of the predictor: one module holding the encoder and the decoder step.

The encoder and the decoder step are traced (straight-line tensor code; the packing of the
source is recorded with dynamic shapes). The searches run outside the module, in the
decoding core (``compgen.decoding``, driven by
``compgen.runtimes.torchscript_predictor``), the same code every backend runs.
Submodules and methods, on source ids ``(B, T)`` (``<s> x </s>``, right-padded with <pad>):

* ``encoder(source)`` -> ``(keys, context, mask, onehot, h, c)``;
* ``step(token, h, c, feed, keys, context, mask, onehot)`` -> ``(logp, h, c, feed)``
  (the first ``feed`` is zeros);
* ``score(source, target)`` -> teacher-forced per-step log-probs ``(B, L-1, V)`` of a
  target starting with ``<s>`` (the parity check reads it).
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from compgen.runtimes.artifact import save_scripted
from compgen.runtimes.predictor_graphs import PredictorEncoder, PredictorStep, example_inputs


class ScriptedPredictor(nn.Module):
    def __init__(self, encoder: torch.jit.ScriptModule, step: torch.jit.ScriptModule,
                 hidden: int):
        super().__init__()
        self.encoder = encoder
        self.step = step
        self.hidden = hidden

    @torch.jit.export
    def score(self, source: Tensor, target: Tensor) -> Tensor:
        keys, context, mask, onehot, h, c = self.encoder(source)
        feed = torch.zeros(source.size(0), self.hidden)
        steps: list[Tensor] = []
        for t in range(target.size(1) - 1):
            logp, h, c, feed = self.step(target[:, t], h, c, feed, keys, context, mask, onehot)
            steps.append(logp)
        return torch.stack(steps, 1)

    def forward(self, source: Tensor, target: Tensor) -> Tensor:
        return self.score(source, target)


def export_predictor_torchscript(model, path) -> torch.jit.ScriptModule:
    """Trace the two graphs of an eval-mode ``model``, script the module around them; save."""
    enc_args, step_args = example_inputs(model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # sizes fixed per model
        encoder = torch.jit.trace(PredictorEncoder(model).eval(), enc_args, check_trace=False)
        step = torch.jit.trace(PredictorStep(model).eval(), step_args, check_trace=False)
    scripted = torch.jit.script(ScriptedPredictor(encoder, step, model.cfg.hidden))
    save_scripted(scripted, path)
    return scripted
