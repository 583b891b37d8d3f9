"""The two graphs an exported predictor (``models/seq2seq.py``) is made of, with flat
tensor inputs and outputs.

``PredictorEncoder``: source ids ``(B, T)`` (``<s> x </s>``, right-padded with <pad>) ->
the decoder's memory (attention keys, context, mask; the one-hot source for copying
models) and its initial hidden state ``h0, c0``. The initial feed is zeros ``(B, H)``.
``PredictorStep``: one batched decoder step: previous token + state + memory -> log p(next
token) over the vocabulary (copying already mixed in) + the new state.

Both wrap the eager ``Seq2Seq`` without re-implementing any of it. The encoder runs on
packed sequences; traced, that becomes ONNX LSTMs with ``sequence_lens``, so a source's
encoding still does not depend on the padding of its batch.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from compgen.data.vocab import BOS_ID, EOS_ID, PAD_ID
from compgen.models.seq2seq import Memory, Seq2Seq, State

STATE_NAMES = ("h", "c", "feed")
MEMORY_NAMES = ("keys", "context", "mask", "source_onehot")
ENCODER_INPUTS = ("source",)
STEP_INPUTS = ("token",) + STATE_NAMES + MEMORY_NAMES
STEP_OUTPUTS = ("logp",) + tuple(f"{n}_out" for n in STATE_NAMES)

DYNAMIC_AXES = {
    "source": {0: "batch", 1: "source_len"}, "token": {0: "batch"}, "logp": {0: "batch"},
    **{n: {0: "batch", 1: "source_len"} for n in MEMORY_NAMES},
    **{n: {0: "batch"} for n in ("h0", "c0") + STATE_NAMES + STEP_OUTPUTS[1:]},
}


def encoder_outputs(copy: bool) -> tuple[str, ...]:
    """Without copying the one-hot source is ``(B, T, 0)``: the ONNX encoder leaves it out
    (and the step graph, which never reads it, has no such input)."""
    return ("keys", "context", "mask") + (("source_onehot",) if copy else ()) + ("h0", "c0")


class PredictorEncoder(nn.Module):
    def __init__(self, model: Seq2Seq, with_onehot: bool = True):
        super().__init__()
        self.model = model
        self.with_onehot = with_onehot

    def forward(self, source: Tensor):
        memory, state = self.model.encode(source)
        if self.with_onehot:
            return memory.keys, memory.context, memory.mask, memory.source_onehot, state.h, state.c
        return memory.keys, memory.context, memory.mask, state.h, state.c


class PredictorStep(nn.Module):
    def __init__(self, model: Seq2Seq):
        super().__init__()
        self.model = model

    def forward(self, token: Tensor, h: Tensor, c: Tensor, feed: Tensor, keys: Tensor,
                context: Tensor, mask: Tensor, source_onehot: Tensor):
        logp, state, _ = self.model.decode_step(token, State(h, c, feed),
                                                Memory(keys, context, mask, source_onehot))
        return logp, state.h, state.c, state.feed


def example_inputs(model: Seq2Seq, seed: int = 0) -> tuple[tuple[Tensor], tuple[Tensor, ...]]:
    """Example encoder and step inputs for tracing: two sources of different lengths, so
    the packing (sort by length, restore the order) is recorded as it runs in general."""
    g = torch.Generator().manual_seed(seed)
    source = torch.randint(6, model.vocab_size, (2, 8), generator=g)
    source[:, 0] = BOS_ID
    source[0, 7] = EOS_ID
    source[1, 4], source[1, 5:] = EOS_ID, PAD_ID
    with torch.no_grad():
        keys, context, mask, onehot, h, c = PredictorEncoder(model)(source)
    token = torch.full((2,), BOS_ID, dtype=torch.long)
    return (source,), (token, h, c, torch.zeros_like(h), keys, context, mask, onehot)
