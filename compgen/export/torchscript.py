"""TorchScript export: the two graphs of a generator in one module, ``model.ts``.

The encoder and the decoder step are traced (straight-line tensor code) and kept as the
submodules ``encoder`` and ``step``; the decode loop around them is the one of
``compgen.decoding`` (Python) and ``cpp_runner/src/decode.hpp`` (C++), both reading the
decoding contract from the manifest. Methods:

* ``encoder(protos, z)`` -> ``(keys, values, mask, h0, c0)``;
* ``step(token, h, c, feed, step, past_h, past_key, past_tok, keys, values, tokens, mask,
  z)`` -> ``(logp, *new state)``;
* ``score(protos, z, target)`` -> per-step log-probs of a given target (teacher
  forcing), used to check parity against the eager model.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from compgen.data.vocab import PAD_ID
from compgen.export.graphs import EncoderGraph, StepGraph, example_inputs


class ScriptedSampler(nn.Module):
    def __init__(self, encoder: torch.jit.ScriptModule, step: torch.jit.ScriptModule,
                 sig: bool, hidden: int, feed_dim: int, latent: int, nproto: int,
                 vocab_size: int):
        super().__init__()
        self.encoder = encoder
        self.step = step
        self.sig = sig
        self.hidden = hidden
        self.feed_dim = feed_dim
        self.latent = latent
        self.nproto = nproto
        self.vocab_size = vocab_size
        self.pad = PAD_ID

    def _initial(self, h: Tensor, c: Tensor, max_steps: int) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
        # the contract's state layout (compgen.decoding.state_layout), for score() only
        B = h.size(0)
        L = max_steps + 1 if self.sig else 0
        width = self.hidden if self.sig else 0
        feed = torch.zeros(B, self.feed_dim)
        step = torch.zeros(B, dtype=torch.long)
        past_h = torch.zeros(B, L, width)
        past_key = torch.zeros(B, L, width)
        past_tok = torch.full([B, L], self.pad, dtype=torch.long)
        return feed, step, past_h, past_key, past_tok

    @torch.jit.export
    def score(self, protos: Tensor, z: Tensor, target: Tensor) -> Tensor:
        """``target`` ``(B, L)`` starts with ``<s>``; returns ``(B, L-1, V)`` log-probs."""
        keys, values, mask, h, c = self.encoder(protos, z)
        L = target.size(1)
        feed, step, past_h, past_key, past_tok = self._initial(h, c, L)
        steps = []
        for t in range(L - 1):
            logp, h, c, feed, step, past_h, past_key, past_tok = self.step(
                target[:, t], h, c, feed, step, past_h, past_key, past_tok, keys, values,
                protos, mask, z)
            steps.append(logp)
        return torch.stack(steps, 1)

    def forward(self, protos: Tensor, z: Tensor, target: Tensor) -> Tensor:
        return self.score(protos, z, target)


def export_torchscript(model, path, max_len: int) -> torch.jit.ScriptModule:
    """Trace the two graphs of a deterministic ``model`` and script the sampler; save it."""
    enc_args, step_args = example_inputs(model, max_steps=max_len)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # sizes fixed per model
        encoder = torch.jit.trace(EncoderGraph(model).eval(), enc_args, check_trace=False)
        step = torch.jit.trace(StepGraph(model).eval(), step_args, check_trace=False)
    sampler = ScriptedSampler(encoder, step, not model.scan, model.hidden, model.feed_dim,
                              model.latent, model.nproto, model.vocab_size)
    scripted = torch.jit.script(sampler)
    scripted.save(str(path))
    return scripted
