"""TorchScript export: one module holding the whole sampler.

The encoder and the decoder step are traced (they are straight-line tensor code), the
decoding loop around them is scripted, so ``model.ts`` runs without Python in the C++
runner as well as from Python. Methods:

* ``decode(protos, z, max_len, temperature, mode)`` -> ``(tokens (B, L), logp (B, L))``:
  mode 0 greedy, 1 temperature sampling, 2 mixed (temperature before ``<sep>``, greedy
  after it, the morphology sampler). ``logp`` holds the model's log-probability of each
  emitted token (temperature 1), which resampling needs. Finished rows emit ``<pad>``.
* ``score(protos, z, target)`` -> per-step log-probs of a given target (teacher forcing),
  used to check parity against the eager model.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor, nn

from compgen.data.vocab import BOS_ID, EOS_ID, PAD_ID, SEP_ID
from compgen.export.graphs import EncoderGraph, StepGraph, example_inputs
from compgen.sampling import banned_mask


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
        self.pad, self.bos, self.eos, self.sep = PAD_ID, BOS_ID, EOS_ID, SEP_ID
        self.register_buffer("first_banned", banned_mask(vocab_size, True))
        self.register_buffer("later_banned", banned_mask(vocab_size, False))

    def _initial(self, h: Tensor, c: Tensor, max_steps: int) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
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
    def decode(self, protos: Tensor, z: Tensor, max_len: int, temperature: float,
               mode: int) -> tuple[Tensor, Tensor]:
        keys, values, mask, h, c = self.encoder(protos, z)
        feed, step, past_h, past_key, past_tok = self._initial(h, c, max_len)
        B = protos.size(0)
        token = torch.full([B], self.bos, dtype=torch.long)
        out = torch.full([B, max_len], self.pad, dtype=torch.long)
        out_logp = torch.zeros(B, max_len)
        done = torch.zeros(B, dtype=torch.bool)
        after_sep = torch.zeros(B, dtype=torch.bool)
        for t in range(max_len):
            logp, h, c, feed, step, past_h, past_key, past_tok = self.step(
                token, h, c, feed, step, past_h, past_key, past_tok, keys, values, protos,
                mask, z)
            logp = logp.masked_fill(self.first_banned if t == 0 else self.later_banned,
                                    float("-inf"))
            greedy = logp.argmax(1)
            if mode == 0:
                nxt = greedy
            else:
                probs = torch.softmax(logp / temperature, dim=1)
                drawn = torch.multinomial(probs, 1).squeeze(1)
                nxt = torch.where(after_sep, greedy, drawn) if mode == 2 else drawn
            nxt = torch.where(done, torch.full_like(nxt, self.pad), nxt)
            out[:, t] = nxt
            out_logp[:, t] = torch.where(done, torch.zeros(B), logp.gather(1, nxt[:, None]).squeeze(1))
            after_sep = after_sep | (nxt == self.sep)
            done = done | (nxt == self.eos)
            token = nxt
            if bool(done.all()):
                return out[:, : t + 1], out_logp[:, : t + 1]
        return out, out_logp

    @torch.jit.export
    def beam(self, protos: Tensor, z: Tensor, max_len: int, width: int) -> tuple[Tensor, Tensor]:
        """Beam search as the eager sampler does it (no length normalisation; a finished
        beam continues with <pad> at +0). Returns the best hypothesis ``(B, L)`` and the
        per-token log-probs along it ``(B, L)``."""
        B, W = protos.size(0), width
        keys, values, mask, h, c = self.encoder(protos.repeat_interleave(W, 0),
                                                z.repeat_interleave(W, 0))
        protos_w = protos.repeat_interleave(W, 0)
        z_w = z.repeat_interleave(W, 0)
        feed, step, past_h, past_key, past_tok = self._initial(h, c, max_len)
        V = self.first_banned.size(0)
        neg = float("-inf")
        finished_row = torch.full([V], neg)
        finished_row[self.pad] = 0.0
        scores = torch.full([B, W], neg)
        scores[:, 0] = 0.0
        hist = torch.full([B, W, max_len], self.pad, dtype=torch.long)
        hist_lp = torch.zeros(B, W, max_len)
        done = torch.zeros(B, W, dtype=torch.bool)
        token = torch.full([B * W], self.bos, dtype=torch.long)
        offsets = (torch.arange(B) * W)[:, None]
        steps = max_len
        for t in range(max_len):
            logp, h, c, feed, step, past_h, past_key, past_tok = self.step(
                token, h, c, feed, step, past_h, past_key, past_tok, keys, values, protos_w,
                mask, z_w)
            logp = logp.masked_fill(self.first_banned if t == 0 else self.later_banned, neg)
            logp = logp.view(B, W, V)
            logp = torch.where(done[:, :, None], finished_row, logp)
            cand = (scores[:, :, None] + logp).view(B, W * V)
            scores, flat = cand.topk(W, dim=1)
            beam = torch.div(flat, V, rounding_mode="floor")
            tok = flat % V
            hist = hist.gather(1, beam[:, :, None].expand(-1, -1, max_len))
            hist_lp = hist_lp.gather(1, beam[:, :, None].expand(-1, -1, max_len))
            hist[:, :, t] = tok
            hist_lp[:, :, t] = logp.view(B, W * V).gather(1, flat)
            done = done.gather(1, beam) | (tok == self.eos)
            index = (beam + offsets).flatten()
            h, c, feed, step = h.index_select(0, index), c.index_select(0, index), \
                feed.index_select(0, index), step.index_select(0, index)
            past_h, past_key, past_tok = past_h.index_select(0, index), \
                past_key.index_select(0, index), past_tok.index_select(0, index)
            token = tok.flatten()
            if bool(done.all()):
                steps = t + 1
                break
        return hist[:, 0, :steps], hist_lp[:, 0, :steps]

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

    def forward(self, protos: Tensor, z: Tensor, max_len: int) -> tuple[Tensor, Tensor]:
        return self.decode(protos, z, max_len, 1.0, 0)


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
