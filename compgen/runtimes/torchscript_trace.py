"""TorchScript export: the three graphs of a generator in one module, ``model.ts``.

The prototype encoder, the encoder and the decoder step are traced (straight-line tensor
code) and kept as the submodules ``prototypes``, ``encoder`` and ``step``; the decode
loop around them is the one of ``compgen.decoding`` (Python) and
``cpp_runner/src/decode.hpp`` (C++), both reading the decoding contract from the
manifest. Methods:

* ``prototypes(seqs)`` -> ``(encoded, h_final, c_final)`` per padded prototype row;
* ``encoder(encoded, h_final, c_final, protos, z)`` -> ``(keys, values, mask, h0, c0)``
  (the first three gathered per tuple, ``(B, K, ...)``);
* ``step(token, h, c, feed, step, past_h, past_key, past_tok, keys, values, tokens, mask,
  z)`` -> ``(logp, *new state)``;
* ``score(protos, z, target)`` -> per-step log-probs of a given target (teacher
  forcing), used to check parity against the eager model.

``bf16=True`` makes the reduced-precision sampler (``compgen.runtimes.reduced``): the
graphs traced under CPU bf16 autocast from a copy of the model whose matrix-product
weights are bf16 already; runtimes replay them under autocast (the module's ``bf16``
attribute says so). A trace records the casts of the ops autocast lists itself, not those
inside composite ops (the LSTMs, einsum), which trace as one op: the replay under
autocast casts those exactly as eager autocast does.
"""

from __future__ import annotations

import contextlib
import copy
import warnings

import torch
from torch import Tensor, nn

from compgen.data.vocab import PAD_ID
from compgen.runtimes.artifact import save_scripted
from compgen.runtimes.graphs import EncoderGraph, PrototypeGraph, StepGraph, example_inputs

# modules whose weights only feed matrix products: the bf16 copy keeps them in bf16 (what
# autocast would cast them to on every call); the tied embedding also feeds the fp32 output
BF16_WEIGHTS = ("proto_encoder", "decoder", "out", "attention.key", "attention.value",
                "attention.query")


def bf16_copy(model: nn.Module) -> nn.Module:
    """A frozen copy of ``model`` whose ``BF16_WEIGHTS`` are bf16."""
    model = copy.deepcopy(model).requires_grad_(False)
    for name in BF16_WEIGHTS:
        model.get_submodule(name).to(torch.bfloat16)
    return model


class Bf16Graph(nn.Module):
    """A graph to trace under bf16 autocast, its floating outputs returned in fp32 (state,
    log-probs, cached prototype encodings), except the outputs ``keep`` (the attention
    memory, which every step's products read in bf16)."""

    def __init__(self, graph: nn.Module, keep: tuple[int, ...] = ()):
        super().__init__()
        self.wrapped, self.keep = graph, keep  # not `graph`: an exported module's own field

    def forward(self, *args):
        out = self.wrapped(*args)
        return tuple(t if i in self.keep or not t.is_floating_point() else t.float()
                     for i, t in enumerate(out))


class ScriptedSampler(nn.Module):
    def __init__(self, prototypes: torch.jit.ScriptModule, encoder: torch.jit.ScriptModule,
                 step: torch.jit.ScriptModule, sig: bool, hidden: int, feed_dim: int,
                 latent: int, nproto: int, vocab_size: int, bf16: bool = False):
        super().__init__()
        self.bf16 = bf16  # replay the graphs under CPU bf16 autocast
        self.prototypes = prototypes
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
        # the contract's state layout (compgen.decoding.contract.state_layout), for score() only
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
        B, K, T = protos.size(0), protos.size(1), protos.size(2)
        if K > 0:  # compgen.runtimes.graphs.encode_tuples
            encoded, h_final, c_final = self.prototypes(protos.reshape(B * K, T))
            encoded = encoded.view(B, K, T, -1)
            h_final, c_final = h_final.view(B, K, -1), c_final.view(B, K, -1)
        else:
            h_final = c_final = torch.zeros(B, 0, 1)
            encoded = h_final[..., None]
        keys, values, mask, h, c = self.encoder(encoded, h_final, c_final, protos, z)
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


def export_torchscript(model, path, max_len: int, bf16: bool = False) -> torch.jit.ScriptModule:
    """Trace the three graphs of a deterministic ``model`` and script the sampler; save it.
    ``bf16``: the reduced-precision sampler (module docstring)."""
    graph, autocast = (lambda g, keep=(): g), contextlib.nullcontext()
    if bf16:
        model = bf16_copy(model)
        graph, autocast = Bf16Graph, torch.autocast("cpu", dtype=torch.bfloat16)
    with torch.no_grad(), autocast, warnings.catch_warnings():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)  # sizes fixed per model
        proto_args, enc_args, step_args = example_inputs(model, max_steps=max_len)
        prototypes = torch.jit.trace(graph(PrototypeGraph(model)).eval(), proto_args,
                                     check_trace=False)
        encoder = torch.jit.trace(graph(EncoderGraph(model), (0, 1)).eval(), enc_args,
                                  check_trace=False)
        step = torch.jit.trace(graph(StepGraph(model)).eval(), step_args, check_trace=False)
    sampler = ScriptedSampler(prototypes, encoder, step, not model.scan, model.hidden,
                              model.feed_dim, model.latent, model.nproto, model.vocab_size,
                              bf16)
    scripted = torch.jit.script(sampler)
    save_scripted(scripted, path)
    return scripted
