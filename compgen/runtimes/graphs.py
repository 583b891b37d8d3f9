"""The three graphs every exported generator is made of, with flat tensor inputs/outputs.

``PrototypeGraph``: padded prototypes ``(N, T)`` -> each one's encoder outputs and final
states, row by row (a runtime encodes each distinct prototype once and keeps it).
``EncoderGraph``: those results gathered per tuple ``(B, K, ...)``, the prototypes
``(B, K, T)`` and the latent ``z`` ``(B, 2Z)`` -> the decoder's memory (attention keys
and values, mask) and its initial hidden state.
``StepGraph``: one batched decoder step: previous token + state + memory -> log p(next
token) over the vocabulary (copying already marginalised) + the new state.

All wrap the eager ``Recombine`` model without re-implementing any of it, so the
exported graphs compute exactly what the eager model computes (``PrototypeGraph`` then
``EncoderGraph`` is ``Recombine.encode``). Test-time dropout
(``outdrop_test``) is switched off in exported graphs: they are deterministic functions,
and all randomness (temperature sampling, the latent prior) lives in the runtimes.

The state layout is the decoding contract's (``compgen.decoding.contract.state_layout``): the
runtimes create the initial state from the manifest, ``STATE_NAMES`` in that order.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from compgen.decoding.contract import STATE_NAMES, state_layout
from compgen.models.recombine import Memory, Recombine, State

MEMORY_NAMES = ("keys", "values", "tokens", "mask", "z")
PROTOTYPE_INPUTS = ("seqs",)
PROTOTYPE_OUTPUTS = ("encoded", "h_final", "c_final")
ENCODER_INPUTS = PROTOTYPE_OUTPUTS + ("protos", "z")
ENCODER_OUTPUTS = ("keys", "values", "mask", "h0", "c0")
STEP_INPUTS = ("token",) + STATE_NAMES + MEMORY_NAMES
STEP_OUTPUTS = ("logp",) + tuple(f"{n}_out" for n in STATE_NAMES)


def deterministic(model: Recombine) -> Recombine:
    """The model in eval mode with test-time dropout off (an exported graph is a function)."""
    model.eval()
    model.outdrop_test = False
    return model


def state_shapes(model: Recombine, batch: int, max_steps: int) -> dict[str, tuple[int, ...]]:
    """Shapes of the initial state for a batch (the sig self-attention buffers hold
    ``max_steps + 1`` slots; scan has none)."""
    layout = state_layout(not model.scan, model.hidden, model.feed_dim, max_steps)
    return {name: (batch, *shape) for name, (shape, _) in layout.items()}


class PrototypeGraph(nn.Module):
    def __init__(self, model: Recombine):
        super().__init__()
        self.model = model

    def forward(self, seqs: Tensor):
        return self.model.encode_sequences(seqs)


class EncoderGraph(nn.Module):
    """Without prototypes (nproto 0) the gathered encodings are not read."""

    def __init__(self, model: Recombine):
        super().__init__()
        self.model = model

    def forward(self, encoded: Tensor, h_final: Tensor, c_final: Tensor, protos: Tensor,
                z: Tensor):
        if self.model.nproto > 0:
            memory, state = self.model.encoded_memory(encoded, h_final, c_final, protos, z, 0)
        else:
            memory, state = self.model.encode(protos, z, 0)
        return memory.keys, memory.values, memory.mask, state.h, state.c


def encode_tuples(encode_sequences, protos: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """``PrototypeGraph`` results gathered per tuple: ``(B, K, T, D)``, ``(B, K, H)`` x 2
    (without prototypes: empty tensors the encoder graph does not read)."""
    B, K, T = protos.shape
    if K == 0:
        empty = torch.zeros(B, 0, 1)
        return empty[..., None], empty, empty
    encoded, h_final, c_final = encode_sequences(protos.reshape(B * K, T))
    return encoded.view(B, K, T, -1), h_final.view(B, K, -1), c_final.view(B, K, -1)


class StepGraph(nn.Module):
    def __init__(self, model: Recombine):
        super().__init__()
        self.model = model

    def forward(self, token: Tensor, h: Tensor, c: Tensor, feed: Tensor, step: Tensor,
                past_h: Tensor, past_key: Tensor, past_tok: Tensor, keys: Tensor,
                values: Tensor, tokens: Tensor, mask: Tensor, z: Tensor):
        state = State(h, c, feed, step, past_h, past_key, past_tok)
        logp, new = self.model.decode_step(token, state, Memory(keys, values, tokens, mask, z))
        return (logp,) + tuple(new)


def example_inputs(model: Recombine, batch: int = 2, length: int = 7, max_steps: int = 8,
                   seed: int = 0) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...], tuple[Tensor, ...]]:
    """Example prototype, encoder and step inputs (used for tracing and ONNX export)."""
    g = torch.Generator().manual_seed(seed)
    K = max(model.nproto, 1)
    protos = torch.randint(6, model.vocab_size, (batch, K, length), generator=g)
    protos[:, :, -1] = 2  # </s>
    if model.nproto == 0:
        protos = protos[:, :0]
    z = torch.zeros(batch, model.latent)
    seqs = protos.reshape(-1, length) if model.nproto else protos.new_full((batch, length), 2)
    with torch.no_grad():
        encoded = encode_tuples(PrototypeGraph(model), protos)
        keys, values, mask, h, c = EncoderGraph(model)(*encoded, protos, z)
    shapes = state_shapes(model, batch, max_steps)
    state = {n: torch.zeros(s) for n, s in shapes.items()}
    state["h"], state["c"] = h, c
    state["step"] = torch.zeros(batch, dtype=torch.long)
    state["past_tok"] = torch.zeros(shapes["past_tok"], dtype=torch.long)
    token = torch.full((batch,), 1, dtype=torch.long)
    step_args = (token,) + tuple(state[n] for n in STATE_NAMES) + (keys, values, protos, mask, z)
    return (seqs,), (*encoded, protos, z), step_args
