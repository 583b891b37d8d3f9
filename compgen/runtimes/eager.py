"""The eager model as one more step function (``EagerStepper``) of the searches of
``compgen.decoding``: strategies (spec §5.1) and everything else that happens between two
decoder steps are the decoding contract (greedy, temperature, mixed, beam of width
``beam_width``; token masks; the counter-based random stream), so every backend gives the
same samples for the same seed."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import Tensor

from compgen.decoding.contract import (
    BEAM_WIDTH,
    Contract,
    mask_ids,
    prior_z,
    scores_of,
)
from compgen.decoding.input_trie import InputTrie
from compgen.decoding.search import BeamSearch, decode, search_for
from compgen.models.recombine import StepWeights


def banned_mask(vocab_size: int, first: bool) -> Tensor:
    mask = torch.zeros(vocab_size, dtype=torch.bool)
    mask[list(mask_ids(first))] = True
    return mask


@dataclass
class Decoded:
    tokens: Tensor  # (B, L) ids, <pad> after </s>
    scores: Tensor  # (B,) sum of log p of the emitted tokens (up to and including </s>)


def _select(tup, index: Tensor):
    return type(tup)(*[t.index_select(0, index) for t in tup])


class EagerStepper:
    """The eager model as a step function of the shared searches (``compgen.decoding``).
    ``record`` (a list) receives every step's StepWeights (attention and copy)."""

    def __init__(self, model, max_len: int, record: list | None = None):
        self.model, self.max_len, self.record = model, max_len, record
        device = next(model.parameters()).device   # a model on a GPU: the steps run there
        self.device = device if device.type != "cpu" else None

    def _on(self, array: np.ndarray) -> Tensor:
        tensor = torch.from_numpy(array)
        return tensor if self.device is None else tensor.to(self.device)

    @torch.no_grad()
    def start(self, protos: np.ndarray, z: np.ndarray) -> None:
        self.memory, self.state = self.model.encode(self._on(protos), self._on(z), self.max_len)

    def started(self, memory, state) -> EagerStepper:
        """This stepper on an encoding made elsewhere (Memory and State of the model)."""
        self.memory, self.state = memory, state
        return self

    @torch.no_grad()
    def step(self, token: np.ndarray) -> np.ndarray:
        token = self._on(token)
        if self.record is None:
            logp, self.state = self.model.decode_step(token, self.state, self.memory)
        else:
            logp, self.state, weights = self.model.decode_step_with_weights(
                token, self.state, self.memory)
            self.record.append(weights)
        return logp.numpy() if self.device is None else logp.cpu().numpy()

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        index = self._on(rows)
        self.state = _select(self.state, index)
        if memory:
            self.memory = _select(self.memory, index)


def model_contract(model, max_len: int | None = None) -> Contract:
    contract = Contract.for_model(model)
    return contract if max_len is None else replace(contract, max_len=max_len)


def _latent(model, contract: Contract, z, seed: int, ids: np.ndarray) -> np.ndarray:
    if z is not None:
        return z.numpy() if isinstance(z, Tensor) else np.asarray(z, np.float32)
    return prior_z(contract, seed, ids)


def decode_batch(model, protos: Tensor, strategy: str = "greedy", temperature: float = 1.0,
                 max_len: int = 45, z: Tensor | None = None, record: list | None = None,
                 seed: int = 0, sample_ids=None, beam_width: int = BEAM_WIDTH,
                 known_inputs: InputTrie | None = None) -> Decoded:
    """Decode one sequence per row of ``protos`` ``(B, K, T)`` with the eager model and
    the shared loop. ``z`` fixes the latent (default: the prior's draw from the random
    stream; zeros without VAE); ``sample_ids`` key the random draws (default 0..B-1).
    ``record`` (a list) receives every step's StepWeights (rows are then never
    compacted, for figures). ``known_inputs``: ``<sep>`` masked after these inputs
    (``compgen.decoding.input_trie``)."""
    contract = replace(model_contract(model, max_len), beam_width=beam_width)
    B = protos.size(0)
    ids = np.arange(B, dtype=np.int64) if sample_ids is None else np.asarray(sample_ids, np.int64)
    latent = _latent(model, contract, z, seed, ids)
    stepper = EagerStepper(model, max_len, record)
    search = search_for(strategy, temperature, seed, beam_width, compact=record is None,
                        known_inputs=known_inputs)
    tokens, token_logp = decode(stepper, contract, protos.numpy(), latent, search, ids, max_len)
    return Decoded(torch.from_numpy(tokens), torch.from_numpy(scores_of(token_logp)).float())


def greedy_with_weights(model, protos: Tensor, max_len: int = 45,
                        z: Tensor | None = None) -> tuple[Decoded, StepWeights]:
    """Greedy decoding (``decode_batch``) that also keeps what every step attended to, for
    figures: StepWeights with attention and copy ``(B, L, K, T)``."""
    steps: list[StepWeights] = []
    decoded = decode_batch(model, protos, "greedy", max_len=max_len, z=z, record=steps)
    return (Decoded(decoded.tokens[:, :len(steps)], decoded.scores),
            StepWeights(torch.stack([w.attention for w in steps], 1),
                        torch.stack([w.copy for w in steps], 1)))


def beam_search(model, protos: Tensor, width: int = BEAM_WIDTH, max_len: int = 45,
                z: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Beam search (the shared loop); returns hypotheses ``(B, W, L)`` and their
    log-probabilities ``(B, W)``, best first. A finished beam continues with <pad> at +0."""
    contract = model_contract(model, max_len)
    B = protos.size(0)
    latent = _latent(model, contract, z, 0, np.arange(B))
    stepper = EagerStepper(model, max_len)
    stepper.start(protos.numpy(), latent)
    tokens, _, scores = BeamSearch(width).hypotheses(stepper, contract, B, max_len)
    pad = np.full((B, width, max_len), contract.pad, np.int64)
    pad[:, :, :tokens.shape[2]] = tokens
    return torch.from_numpy(pad), torch.from_numpy(scores).float()


# ------------------------------------------------------------------ collecting samples
