"""TorchScript export of the predictor: one module holding encoder, decoder step and the
search loops of ``models/seq2seq.py``.

The encoder and the decoder step are traced (straight-line tensor code; the packing of the
source is recorded with dynamic shapes); the loops around them are scripted and follow
``greedy_search`` and ``beam_search`` operation by operation, so the outputs are the eager
ones. Methods, all on source ids ``(B, T)`` (``<s> x </s>``, right-padded with <pad>):

* ``greedy(source, max_len)`` -> ``(tokens (B, L), logp (B, L))``: argmax under the step
  masks, stopping once every row has emitted ``</s>`` (tokens after a row's ``</s>`` are
  not meaningful, as in the eager search); ``logp`` is the log-probability of each emitted
  token.
* ``beam(source, max_len, width)`` -> ``(best tokens (B, L), their log-probability (B,))``.
* ``score(source, target)`` -> teacher-forced per-step log-probs ``(B, L-1, V)`` of a
  target starting with ``<s>`` (the parity check reads it).
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from compgen.data.vocab import BOS_ID, EOS_ID
from compgen.export.artifact import save_scripted
from compgen.export.predictor_graphs import PredictorEncoder, PredictorStep, example_inputs
from compgen.models.seq2seq import step_masks


class ScriptedPredictor(nn.Module):
    def __init__(self, encoder: torch.jit.ScriptModule, step: torch.jit.ScriptModule,
                 hidden: int, vocab_size: int):
        super().__init__()
        self.encoder = encoder
        self.step = step
        self.hidden = hidden
        self.vocab_size = vocab_size
        self.bos, self.eos = BOS_ID, EOS_ID
        first, later = step_masks(vocab_size)
        self.register_buffer("first_mask", first)
        self.register_buffer("later_mask", later)
        only_eos = torch.full([vocab_size], float("-inf"))
        only_eos[EOS_ID] = 0.0
        self.register_buffer("only_eos", only_eos)  # what a finished beam may propose

    @torch.jit.export
    def greedy(self, source: Tensor, max_len: int) -> tuple[Tensor, Tensor]:
        keys, context, mask, onehot, h, c = self.encoder(source)
        B = source.size(0)
        feed = torch.zeros(B, self.hidden)
        token = torch.full([B], self.bos, dtype=torch.long)
        done = torch.zeros(B, dtype=torch.bool)
        tokens: list[Tensor] = []
        token_logp: list[Tensor] = []
        for t in range(max_len):
            logp, h, c, feed = self.step(token, h, c, feed, keys, context, mask, onehot)
            token = (logp + (self.first_mask if t == 0 else self.later_mask)).argmax(1)
            tokens.append(token)
            token_logp.append(logp.gather(1, token[:, None]).squeeze(1))
            done = done | (token == self.eos)
            if bool(done.all()):
                break
        return torch.stack(tokens, 1), torch.stack(token_logp, 1)

    @torch.jit.export
    def beam(self, source: Tensor, max_len: int, width: int) -> tuple[Tensor, Tensor]:
        """As ``beam_search``: the first step expands the start into the top ``width``
        tokens, a finished beam proposes only ``</s>`` at +0, no length normalisation."""
        B, V = source.size(0), self.vocab_size
        keys, context, mask, onehot, h, c = self.encoder(source)
        # encode once, then repeat (as the eager search: same numbers as greedy's)
        keys, context = keys.repeat_interleave(width, 0), context.repeat_interleave(width, 0)
        mask, onehot = mask.repeat_interleave(width, 0), onehot.repeat_interleave(width, 0)
        h, c = h.repeat_interleave(width, 0), c.repeat_interleave(width, 0)
        feed = torch.zeros(B * width, self.hidden)
        scores = torch.full([B, width], float("-inf"))
        scores[:, 0] = 0.0  # one live hypothesis before the first step
        token = torch.full([B * width], self.bos, dtype=torch.long)
        done = torch.zeros(B * width, dtype=torch.bool)
        history = torch.zeros(B * width, 0, dtype=torch.long)
        rows = torch.arange(B)[:, None] * width
        for t in range(max_len):
            logp, h, c, feed = self.step(token, h, c, feed, keys, context, mask, onehot)
            logp = torch.where(done[:, None], self.only_eos,
                               logp + (self.first_mask if t == 0 else self.later_mask))
            candidates = (scores.reshape(-1, 1) + logp).view(B, width * V)
            scores, index = candidates.topk(width, dim=1)
            parent = (rows + torch.div(index, V, rounding_mode="floor")).reshape(-1)
            token = (index % V).reshape(-1)
            h, c, feed = h[parent], c[parent], feed[parent]
            history = torch.cat([history[parent], token[:, None]], 1)
            done = done[parent] | (token == self.eos)
            if bool(done.all()):
                break
        return history.view(B, width, -1)[:, 0], scores[:, 0]

    @torch.jit.export
    def score(self, source: Tensor, target: Tensor) -> Tensor:
        keys, context, mask, onehot, h, c = self.encoder(source)
        feed = torch.zeros(source.size(0), self.hidden)
        steps: list[Tensor] = []
        for t in range(target.size(1) - 1):
            logp, h, c, feed = self.step(target[:, t], h, c, feed, keys, context, mask, onehot)
            steps.append(logp)
        return torch.stack(steps, 1)

    def forward(self, source: Tensor, max_len: int) -> tuple[Tensor, Tensor]:
        return self.greedy(source, max_len)


def export_predictor_torchscript(model, path) -> torch.jit.ScriptModule:
    """Trace the two graphs of an eval-mode ``model``, script the search loops; save."""
    enc_args, step_args = example_inputs(model)
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # sizes fixed per model
        encoder = torch.jit.trace(PredictorEncoder(model).eval(), enc_args, check_trace=False)
        step = torch.jit.trace(PredictorStep(model).eval(), step_args, check_trace=False)
    scripted = torch.jit.script(ScriptedPredictor(encoder, step, model.cfg.hidden,
                                                  model.vocab_size))
    save_scripted(scripted, path)
    return scripted
