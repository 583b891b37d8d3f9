"""The two graphs an exported inflection model (``models/inflection.py``) is made of.

``EncoderGraph``: source ids -> the cross-attention keys/values of every decoder layer +
the source padding mask. ``StepGraph``: one incremental step: last token, its position,
the self-attention cache and the encoder's keys/values -> log p(next token) and the grown
cache. The beam search runs outside the graphs.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from compgen.models.inflection import (
    BOS_ID,
    IncrementalDecoder,
    InflectionTransformer,
    _attend,
    _split_heads,
)

ENCODER_INPUTS = ("source",)
ENCODER_OUTPUTS = ("memory_k", "memory_v", "src_pad")
STEP_INPUTS = ("token", "position", "past_k", "past_v", "memory_k", "memory_v", "src_pad")
STEP_OUTPUTS = ("logp", "past_k_out", "past_v_out")
DYNAMIC_AXES = {"source": {0: "batch", 1: "source_len"}, "token": {0: "batch"},
                "logp": {0: "batch"}, "src_pad": {0: "batch", 1: "source_len"},
                **{n: {1: "batch", 3: "source_len"} for n in ("memory_k", "memory_v")},
                **{n: {1: "batch", 3: "steps"} for n in ("past_k", "past_v", "past_k_out",
                                                         "past_v_out")}}


class EncoderGraph(nn.Module):
    def __init__(self, model: InflectionTransformer):
        super().__init__()
        self.model = model

    def forward(self, source: Tensor):
        # the encoder written out with shape-generic ops (nn.MultiheadAttention's traced
        # graph keeps the example's source length); same function as model.encode
        m = self.model
        d, heads = m.config.embed_dim, m.config.heads
        pad = source.eq(0)
        x = m.src_embed(source) * m.scale + m.positions[: source.shape[1]]
        for layer in m.encoder.layers:
            sa = layer.self_attn
            q, k, v = (_split_heads(t, heads) for t in (x @ sa.in_proj_weight.T + sa.in_proj_bias).split(d, -1))
            x = layer.norm1(x + sa.out_proj(_attend(q, k, v, pad)))
            x = layer.norm2(x + layer.linear2(layer.activation(layer.linear1(x))))
        memory = x
        dec = IncrementalDecoder(self.model, memory, pad)
        return (torch.stack([k for k, _ in dec.memory_kv]), torch.stack([v for _, v in dec.memory_kv]),
                pad.to(torch.uint8))


class StepGraph(nn.Module):
    """[layers, batch, heads, steps, head_dim] caches; ``position`` = steps so far."""

    def __init__(self, model: InflectionTransformer):
        super().__init__()
        self.model = model

    def forward(self, token, position, past_k, past_v, memory_k, memory_v, src_pad):
        dec = IncrementalDecoder.__new__(IncrementalDecoder)
        dec.model, dec.heads, dec.pad = self.model, self.model.config.heads, src_pad.bool()
        dec.memory_kv = list(zip(memory_k.unbind(0), memory_v.unbind(0), strict=True))
        dec.cache = list(zip(past_k.unbind(0), past_v.unbind(0), strict=True))
        dec.length = position
        logits = dec.step(token)
        return (torch.log_softmax(logits, -1), torch.stack([k for k, _ in dec.cache]),
                torch.stack([v for _, v in dec.cache]))


def example_inputs(net: InflectionTransformer, vocab_size: int) -> tuple[tuple, tuple]:
    """Example encoder and step inputs for tracing: two sources of different lengths."""
    example = torch.tensor([[5, 6, 7], [6, 5, 0]]).clamp(max=vocab_size - 1)
    with torch.no_grad():
        mk, mv, pad = EncoderGraph(net)(example)
    layers, _, heads, _, dim = mk.shape
    empty = torch.zeros(layers, 2, heads, 0, dim)
    return (example,), (torch.tensor([BOS_ID, BOS_ID]), torch.tensor(0), empty, empty, mk, mv, pad)
