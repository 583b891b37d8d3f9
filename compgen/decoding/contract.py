"""The decoding contract of a generator, written into every export's ``manifest.json``.

A generator decodes ``x <sep> y </s>`` one token per step from a step function (eager
PyTorch, the TorchScript graphs or the ONNX graphs of an export; ``stepper.Stepper``).
What happens between two steps is fixed here, once, and written into the manifest
(``Contract.to_manifest``) so that runtimes (and the C++ runner, which implements the same
loop in ``cpp_runner/src/decode.hpp``) read it instead of importing this package:

* strategies (``--strategy``): greedy, temperature, mixed (temperature until ``<sep>``,
  greedy after it) - a greedy search with an argmax, temperature or mixed sampler
  (``samplers``) - and beam (``search.BeamSearch``; width ``beam_width``, no length
  normalisation, a finished beam continues with ``<pad>`` at +0, candidates ranked by
  score then by lower flat index). ``MODES`` numbers them for the manifest and the C++
  runner's job file;
* token masks: the first step may not emit ``first_step_masked``, later steps not
  ``later_steps_masked``; masked log-probabilities are -inf;
* random draws: the counter-based stream of ``random_stream`` keyed by (seed, sample
  index, step) - the sample index is the position of the sample's prototype tuple in the
  sampling run, so a draw does not depend on batching or on finished rows being compacted
  out of the batch (how a token is drawn: ``samplers.draw_tokens``);
* scores: the sum, in double precision and step order, of the emitted tokens'
  (unmasked-temperature) log-probabilities up to and including ``</s>``; the n kept are
  the best by score rounded to 1e-4, ties in decoding order (``rank_key``);
* the latent prior: zeros, or (VAE) a direction from Box-Muller normals and a norm
  ``max_norm * u``, drawn from the stream at steps ``LATENT_STEP + j`` (``prior_z``);
* state layout: the decoder state's names, per-row shapes and dtypes;
* prototypes: how many tuples the export stores in ``prototypes.txt`` (sample index i
  takes tuple i modulo that number) and the width every prototype is padded to before it
  is encoded, so that a prototype's encoding never depends on the batch it is decoded in
  (``prototypes.PrototypeCache``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from compgen.data.vocab import BOS_ID, COPY_ID, EOS_ID, PAD_ID, SEP_ID, UNK_ID
from compgen.decoding.random_stream import LATENT_STEP, uniform
from compgen.decoding.random_stream import NAME as STREAM_NAME
from compgen.errors import SettingError, UserError

# the strategies' numbers in the manifest and in the C++ runner's job file
MODES = {"greedy": 0, "temperature": 1, "mixed": 2, "beam": 3}
STRATEGIES = tuple(MODES)
FIRST_STEP_MASKED = (PAD_ID, BOS_ID, EOS_ID, UNK_ID, SEP_ID, COPY_ID)
LATER_STEPS_MASKED = (PAD_ID, BOS_ID, UNK_ID, COPY_ID)
BEAM_WIDTH = 4
STATE_NAMES = ("h", "c", "feed", "step", "past_h", "past_key", "past_tok")
# how an export's graphs encode prototypes: one padded prototype per row of the prototype
# graph, then the encoder graph over the results gathered per tuple
PROTOTYPE_ENCODING = "per prototype (prototypes graph), gathered per tuple (encoder graph)"


def check_strategy(strategy: str) -> None:
    if strategy not in MODES:
        raise SettingError(f"`strategy` {strategy}: unknown (valid: {', '.join(STRATEGIES)})")


def mask_ids(first: bool) -> tuple[int, ...]:
    return FIRST_STEP_MASKED if first else LATER_STEPS_MASKED


@dataclass(frozen=True)
class StepRules:
    """What a search reads between two steps: the start, end and filler tokens, the ids
    the first and the later steps may not emit, and the value a masked entry gets."""
    vocab_size: int
    bos: int = BOS_ID
    eos: int = EOS_ID
    pad: int = PAD_ID
    sep: int = SEP_ID
    first_step_masked: tuple = FIRST_STEP_MASKED
    later_steps_masked: tuple = LATER_STEPS_MASKED
    masked_value: float = -math.inf

    def masked(self, first: bool) -> np.ndarray:
        mask = np.zeros(self.vocab_size, bool)
        mask[list(self.first_step_masked if first else self.later_steps_masked)] = True
        return mask


def state_layout(sig: bool, hidden: int, feed_dim: int, max_len: int) -> dict:
    """Per-row shape and dtype of every state tensor (the sig self-attention buffers
    hold ``max_len + 1`` slots; scan has none)."""
    slots = max_len + 1 if sig else 0
    width = hidden if sig else 0
    return {"h": ([hidden], "float32"), "c": ([hidden], "float32"),
            "feed": ([feed_dim], "float32"), "step": ([], "int64"),
            "past_h": ([slots, width], "float32"), "past_key": ([slots, width], "float32"),
            "past_tok": ([slots], "int64")}


@dataclass(frozen=True, kw_only=True)
class Contract(StepRules):
    """A generator's step rules and what else an export's runtimes must agree on: the
    shapes, the beam width, the latent prior, the stored prototypes, the random stream."""
    max_len: int
    latent: int
    state: dict = field(default_factory=dict)   # name -> (per-row shape, dtype)
    beam_width: int = BEAM_WIDTH
    vae_max_norm: float = 0.0                   # 0: the latent is zeros
    prototypes: int = 0                          # tuples stored in prototypes.txt
    prototype_width: int = 0                     # every tuple padded to it (0: the batch's)
    modes: dict = field(default_factory=lambda: dict(MODES))
    random_stream: str = STREAM_NAME
    prototype_encoding: str = PROTOTYPE_ENCODING

    @classmethod
    def for_model(cls, model, *, beam_width: int = BEAM_WIDTH, prototypes: int = 0,
                  prototype_width: int = 0) -> Contract:
        cfg = model.cfg
        return cls(vocab_size=model.vocab_size, max_len=cfg.max_len, latent=model.latent,
                   state=state_layout(not model.scan, model.hidden, model.feed_dim, cfg.max_len),
                   beam_width=beam_width, vae_max_norm=cfg.max_norm if cfg.vae else 0.0,
                   prototypes=prototypes, prototype_width=prototype_width)

    def to_manifest(self) -> dict:
        out = asdict(self)
        del out["masked_value"]     # -inf: the contract says so, JSON cannot
        out["state"] = {k: {"shape": list(s), "dtype": d} for k, (s, d) in self.state.items()}
        out["state_order"] = list(STATE_NAMES)
        for key in ("first_step_masked", "later_steps_masked"):
            out[key] = list(out[key])
        return out

    @classmethod
    def from_manifest(cls, decoding: dict) -> Contract:
        if (decoding.get("random_stream") != STREAM_NAME
                or decoding.get("prototype_encoding") != PROTOTYPE_ENCODING):
            raise UserError("manifest.json: the export's decoding contract predates the "
                            "shared random stream or the per-prototype encoder graph; "
                            "re-export it (compgen export FOLDER)")
        known = {k: v for k, v in decoding.items() if k in cls.__dataclass_fields__}
        known["state"] = {k: (list(v["shape"]), v["dtype"]) for k, v in decoding["state"].items()}
        for key in ("first_step_masked", "later_steps_masked"):
            known[key] = tuple(known[key])
        return cls(**known)

    def initial_state(self, h: np.ndarray, c: np.ndarray) -> dict:
        """The decoder state before the first step (h, c from the encoder)."""
        B = h.shape[0]
        state = {}
        for name, (shape, dtype) in self.state.items():
            fill = self.pad if name == "past_tok" else 0
            state[name] = np.full([B, *shape], fill, dtype)
        state["h"], state["c"] = h, c
        return state


def prior_z(contract: Contract, seed: int, sample_ids: np.ndarray) -> np.ndarray:
    """The latent of each sample: zeros, or the vMF prior's draw (uniform direction from
    Box-Muller normals, norm uniform in [0, vae_max_norm])."""
    B, Z = len(sample_ids), contract.latent
    if contract.vae_max_norm <= 0:
        return np.zeros((B, Z), np.float32)
    pairs = (Z + 1) // 2
    steps = LATENT_STEP + np.arange(2 * pairs + 1, dtype=np.int64)
    u = uniform(seed, np.asarray(sample_ids, np.int64)[:, None], steps[None, :])
    radius = np.sqrt(-2.0 * np.log1p(-u[:, 0:2 * pairs:2]))
    angle = 2.0 * np.pi * u[:, 1:2 * pairs:2]
    normal = np.concatenate([radius * np.cos(angle), radius * np.sin(angle)], 1)[:, :Z]
    direction = normal / np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)
    return (direction * contract.vae_max_norm * u[:, -1:]).astype(np.float32)


def rank_key(score: float) -> float:
    """Samples are ranked by their score rounded to 1e-4 (best first; ties keep decoding
    order): backends differ in the last float digits, so near-ties must not decide."""
    return -math.floor(score * 1e4 + 0.5)


def scores_of(token_logp: np.ndarray) -> np.ndarray:
    """Sum of the emitted tokens' log-probs in double precision, step by step."""
    if token_logp.shape[1] == 0:
        return np.zeros(token_logp.shape[0])
    return np.cumsum(token_logp.astype(np.float64), 1)[:, -1]
