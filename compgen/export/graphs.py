"""The two graphs every exported generator is made of, with flat tensor inputs/outputs.

``EncoderGraph``: prototypes ``(B, K, T)`` and latent ``z`` ``(B, 2Z)`` -> the decoder's
memory (attention keys and values, mask) and its initial hidden state.
``StepGraph``: one batched decoder step: previous token + state + memory -> log p(next
token) over the vocabulary (copying already marginalised) + the new state.

Both wrap the eager ``Recombine`` model without re-implementing any of it, so the
exported graphs compute exactly what the eager model computes. Test-time dropout
(``outdrop_test``) is switched off in exported graphs: they are deterministic functions,
and all randomness (temperature sampling, the latent prior) lives in the runtimes.

The state layout is the decoding contract's (``compgen.decoding.state_layout``): the
runtimes create the initial state from the manifest, ``STATE_NAMES`` in that order.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from compgen.decoding import STATE_NAMES, state_layout
from compgen.models.recombine import Memory, Recombine, State

MEMORY_NAMES = ("keys", "values", "tokens", "mask", "z")
ENCODER_INPUTS = ("protos", "z")
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


class EncoderGraph(nn.Module):
    def __init__(self, model: Recombine):
        super().__init__()
        self.model = model

    def forward(self, protos: Tensor, z: Tensor):
        memory, state = self.model.encode(protos, z, 0)
        return memory.keys, memory.values, memory.mask, state.h, state.c


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
                   seed: int = 0) -> tuple[tuple[Tensor, ...], tuple[Tensor, ...]]:
    """Example encoder and step inputs (used for tracing and ONNX export)."""
    g = torch.Generator().manual_seed(seed)
    K = max(model.nproto, 1)
    protos = torch.randint(6, model.vocab_size, (batch, K, length), generator=g)
    protos[:, :, -1] = 2  # </s>
    if model.nproto == 0:
        protos = protos[:, :0]
    z = torch.zeros(batch, model.latent)
    with torch.no_grad():
        keys, values, mask, h, c = EncoderGraph(model)(protos, z)
    shapes = state_shapes(model, batch, max_steps)
    state = {n: torch.zeros(s) for n, s in shapes.items()}
    state["h"], state["c"] = h, c
    state["step"] = torch.zeros(batch, dtype=torch.long)
    state["past_tok"] = torch.zeros(shapes["past_tok"], dtype=torch.long)
    token = torch.full((batch,), 1, dtype=torch.long)
    step_args = (token,) + tuple(state[n] for n in STATE_NAMES) + (keys, values, protos, mask, z)
    return (protos, z), step_args
