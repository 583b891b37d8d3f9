"""The decoding contract, and the one decode loop every Python backend runs.

A generator decodes ``x <sep> y </s>`` one token per step from a *step function*: eager
PyTorch, the TorchScript graphs or the ONNX graphs of an export (``Stepper``). What
happens between two steps is fixed here, once, and written into an export's
``manifest.json`` (``Contract.to_manifest``) so that runtimes (and the C++ runner, which
implements the same loop in ``cpp_runner/src/decode.hpp``) read it instead of importing
this module:

* modes: greedy (0), temperature (1), mixed (2: temperature until ``<sep>``, greedy
  after it), beam (3; width ``beam_width``, no length normalisation, a finished beam
  continues with ``<pad>`` at +0, candidates ranked by score then by lower flat index);
* token masks: the first step may not emit ``first_step_masked``, later steps not
  ``later_steps_masked``; masked log-probabilities are -inf;
* random draws: the counter-based stream of ``compgen.decoding.random_stream`` keyed by (seed,
  sample index, step) - the sample index is the position of the sample's prototype tuple
  in the sampling run, so a draw does not depend on batching or on finished rows being
  compacted out of the batch. A token is drawn by inverse CDF: p_i = exp(l_i/T - max)
  in double precision, summed in vocabulary order; the token is the first i whose running
  sum exceeds u times the total;
* scores: the sum, in double precision and step order, of the emitted tokens'
  (unmasked-temperature) log-probabilities up to and including ``</s>``; the n kept are
  the best by score rounded to 1e-4, ties in decoding order (``rank_key``);
* the latent prior: zeros, or (VAE) a direction from Box-Muller normals and a norm
  ``max_norm * u``, drawn from the stream at steps ``LATENT_STEP + j``;
* state layout: the decoder state's names, per-row shapes and dtypes;
* prototypes: how many tuples the export stores in ``prototypes.txt`` (sample index i
  takes tuple i modulo that number) and the width every prototype is padded to before it
  is encoded, so that a prototype's encoding never depends on the batch it is decoded in
  (the prototype encoder runs unpacked, as the reference's does) and each distinct
  prototype is encoded once (``PrototypeCache``).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Protocol

import numpy as np

from compgen.data.vocab import BOS_ID, COPY_ID, EOS_ID, PAD_ID, SEP_ID, UNK_ID
from compgen.decoding.random_stream import LATENT_STEP, uniform
from compgen.decoding.random_stream import NAME as STREAM_NAME
from compgen.errors import UserError

MODES = {"greedy": 0, "temperature": 1, "mixed": 2, "beam": 3}
STRATEGIES = tuple(MODES)
FIRST_STEP_MASKED = (PAD_ID, BOS_ID, EOS_ID, UNK_ID, SEP_ID, COPY_ID)
LATER_STEPS_MASKED = (PAD_ID, BOS_ID, UNK_ID, COPY_ID)
BEAM_WIDTH = 4
STATE_NAMES = ("h", "c", "feed", "step", "past_h", "past_key", "past_tok")
# how an export's graphs encode prototypes: one padded prototype per row of the prototype
# graph, then the encoder graph over the results gathered per tuple
PROTOTYPE_ENCODING = "per prototype (prototypes graph), gathered per tuple (encoder graph)"
NEG = -np.inf


def check_strategy(strategy: str) -> None:
    if strategy not in MODES:
        raise UserError(f"--strategy {strategy}: unknown (valid: {', '.join(STRATEGIES)})")


def mask_ids(first: bool) -> tuple[int, ...]:
    return FIRST_STEP_MASKED if first else LATER_STEPS_MASKED


def state_layout(sig: bool, hidden: int, feed_dim: int, max_len: int) -> dict:
    """Per-row shape and dtype of every state tensor (the sig self-attention buffers
    hold ``max_len + 1`` slots; scan has none)."""
    slots = max_len + 1 if sig else 0
    width = hidden if sig else 0
    return {"h": ([hidden], "float32"), "c": ([hidden], "float32"),
            "feed": ([feed_dim], "float32"), "step": ([], "int64"),
            "past_h": ([slots, width], "float32"), "past_key": ([slots, width], "float32"),
            "past_tok": ([slots], "int64")}


@dataclass(frozen=True)
class Contract:
    vocab_size: int
    max_len: int
    latent: int
    state: dict = field(default_factory=dict)   # name -> (per-row shape, dtype)
    beam_width: int = BEAM_WIDTH
    vae_max_norm: float = 0.0                   # 0: the latent is zeros
    prototypes: int = 0                          # tuples stored in prototypes.txt
    prototype_width: int = 0                     # every tuple padded to it (0: the batch's)
    bos: int = BOS_ID
    eos: int = EOS_ID
    pad: int = PAD_ID
    sep: int = SEP_ID
    first_step_masked: tuple = FIRST_STEP_MASKED
    later_steps_masked: tuple = LATER_STEPS_MASKED
    modes: dict = field(default_factory=lambda: dict(MODES))
    random_stream: str = STREAM_NAME
    prototype_encoding: str = PROTOTYPE_ENCODING

    @classmethod
    def for_model(cls, model, *, beam_width: int = BEAM_WIDTH, prototypes: int = 0,
                  prototype_width: int = 0) -> Contract:
        cfg = model.cfg
        return cls(model.vocab_size, cfg.max_len, model.latent,
                   state_layout(not model.scan, model.hidden, model.feed_dim, cfg.max_len),
                   beam_width, cfg.max_norm if cfg.vae else 0.0, prototypes, prototype_width)

    def to_manifest(self) -> dict:
        out = asdict(self)
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

    def masked(self, first: bool) -> np.ndarray:
        mask = np.zeros(self.vocab_size, bool)
        mask[list(self.first_step_masked if first else self.later_steps_masked)] = True
        return mask

    def initial_state(self, h: np.ndarray, c: np.ndarray) -> dict:
        """The decoder state before the first step (h, c from the encoder)."""
        B = h.shape[0]
        state = {}
        for name, (shape, dtype) in self.state.items():
            fill = self.pad if name == "past_tok" else 0
            state[name] = np.full([B, *shape], fill, dtype)
        state["h"], state["c"] = h, c
        return state


class Stepper(Protocol):
    """A backend's step function over a batch it keeps (state and memory)."""

    def start(self, protos: np.ndarray, z: np.ndarray) -> None:
        """Encode prototypes ``(B, K, T)`` and latent ``(B, 2Z)``; initial state."""

    def step(self, token: np.ndarray) -> np.ndarray:
        """Feed ``(B,)`` tokens; log p of the next token ``(B, V)`` float32."""

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        """Keep (and reorder) these rows of the state, and of the memory if asked."""


# ------------------------------------------------------------------ random choices

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


def draw_tokens(logp: np.ndarray, temperature: float, u: np.ndarray) -> np.ndarray:
    """Inverse-CDF draws from softmax(logp / T) (masked entries are -inf)."""
    scaled = logp.astype(np.float64) / temperature
    weights = np.exp(scaled - scaled.max(1, keepdims=True))
    running = np.cumsum(weights, 1)  # sequential, in vocabulary order
    chosen = (running <= (u * running[:, -1])[:, None]).sum(1)
    return np.minimum(chosen, logp.shape[1] - 1)


def rank_key(score: float) -> float:
    """Samples are ranked by their score rounded to 1e-4 (best first; ties keep decoding
    order): backends differ in the last float digits, so near-ties must not decide."""
    return -math.floor(score * 1e4 + 0.5)


def scores_of(token_logp: np.ndarray) -> np.ndarray:
    """Sum of the emitted tokens' log-probs in double precision, step by step."""
    if token_logp.shape[1] == 0:
        return np.zeros(token_logp.shape[0])
    return np.cumsum(token_logp.astype(np.float64), 1)[:, -1]


# ------------------------------------------------------------------ the loops

def decode(stepper: Stepper, contract: Contract, protos: np.ndarray, z: np.ndarray, mode: int,
           temperature: float = 1.0, seed: int = 0, sample_ids: np.ndarray | None = None,
           max_len: int | None = None, compact: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Greedy / temperature / mixed decoding of one sequence per row. Returns tokens
    ``(B, L)`` (``<pad>`` after ``</s>``) and each token's log p ``(B, L)`` float32.
    Finished rows are compacted out of the batch (``compact``)."""
    if mode == MODES["beam"]:
        tokens, token_logp, _ = beam(stepper, contract, protos, z, contract.beam_width, max_len)
        return tokens[:, 0], token_logp[:, 0]
    B = protos.shape[0]
    L = max_len or contract.max_len
    ids = np.arange(B, dtype=np.int64) if sample_ids is None else np.asarray(sample_ids, np.int64)
    stepper.start(protos, z)
    out = np.full((B, L), contract.pad, np.int64)
    out_logp = np.zeros((B, L), np.float32)
    rows = np.arange(B)                   # batch rows still decoding
    token = np.full(B, contract.bos, np.int64)
    after_sep = np.zeros(B, bool)
    done = np.zeros(B, bool)              # without compaction: rows fed <pad> after </s>
    first, later = contract.masked(True), contract.masked(False)
    used = 0
    for t in range(L):
        logp = stepper.step(token)
        logp = np.where(first if t == 0 else later, np.float32(NEG), logp)
        nxt = logp.argmax(1)
        if mode != MODES["greedy"]:
            drawn = draw_tokens(logp, temperature, uniform(seed, ids[rows], t))
            nxt = np.where(after_sep, nxt, drawn) if mode == MODES["mixed"] else drawn
        chosen_logp = logp[np.arange(len(rows)), nxt]
        if not compact:
            nxt = np.where(done, contract.pad, nxt)
            chosen_logp = np.where(done, np.float32(0), chosen_logp)
        out[rows, t] = nxt
        out_logp[rows, t] = chosen_logp
        used = t + 1
        after_sep = after_sep | (nxt == contract.sep)
        ended = nxt == contract.eos
        if compact:
            if ended.all():
                break
            if ended.any():
                live = ~ended
                stepper.take(np.flatnonzero(live))
                rows, nxt, after_sep = rows[live], nxt[live], after_sep[live]
        else:
            done |= ended
            if done.all():
                break
        token = nxt
    return out[:, :used], out_logp[:, :used]


def beam(stepper: Stepper, contract: Contract, protos: np.ndarray, z: np.ndarray, width: int,
         max_len: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Beam search. Returns hypotheses ``(B, W, L)``, their per-token log-probs ``(B, W, L)``
    and scores ``(B, W)`` (double), best first."""
    B, W, V = protos.shape[0], width, contract.vocab_size
    L = max_len or contract.max_len
    stepper.start(protos, z)
    stepper.take(np.repeat(np.arange(B), W))  # W copies of each row: encoded once
    finished_row = np.full(V, NEG)
    finished_row[contract.pad] = 0.0
    scores = np.full((B, W), NEG)
    scores[:, 0] = 0.0  # one live hypothesis at the start
    hist = np.full((B, W, L), contract.pad, np.int64)
    hist_lp = np.zeros((B, W, L), np.float32)
    done = np.zeros((B, W), bool)
    token = np.full(B * W, contract.bos, np.int64)
    offsets = (np.arange(B) * W)[:, None]
    first, later = contract.masked(True), contract.masked(False)
    used = 0
    for t in range(L):
        logp = stepper.step(token)
        logp = np.where(first if t == 0 else later, np.float32(NEG), logp).reshape(B, W, V)
        logp = np.where(done[..., None], finished_row.astype(np.float32), logp)
        cand = (scores[..., None] + logp.astype(np.float64)).reshape(B, W * V)
        flat = np.argsort(-cand, axis=1, kind="stable")[:, :W]  # ties: lower index first
        scores = np.take_along_axis(cand, flat, 1)
        parent, tok = flat // V, flat % V
        hist = np.take_along_axis(hist, parent[..., None], 1)
        hist_lp = np.take_along_axis(hist_lp, parent[..., None], 1)
        hist[:, :, t] = tok
        hist_lp[:, :, t] = np.take_along_axis(logp.reshape(B, W * V), flat, 1)
        done = np.take_along_axis(done, parent, 1) | (tok == contract.eos)
        used = t + 1
        if done.all():
            break
        stepper.take((parent + offsets).ravel(), memory=False)  # parents share the memory
        token = tok.ravel()
    return hist[:, :, :used], hist_lp[:, :, :used], scores


# ------------------------------------------------------------------ prototype encodings

class PrototypeCache:
    """The prototype encoder's results per distinct prototype, computed once: prototypes
    are encoded row by row (``Recombine.encode_sequences``), each padded to the contract's
    ``prototype_width``, so one met again - in the same batch, in another tuple, in a
    later round - costs nothing; the encoder graph then gathers them per tuple.
    ``encode_sequences(seqs)`` ``(N, T)`` -> (encoded, h_final, c_final) arrays, one row
    per prototype; ``encode_tuples(encoded, h_final, c_final, protos, z)`` (the first
    three gathered to ``(B, K, ...)``) -> dict of ``keys``, ``values``, ``mask``, ``h``,
    ``c``. At most ``budget`` bytes are kept, the least recently used dropped first;
    ``encoded`` counts the prototypes the encoder ran on."""

    def __init__(self, encode_sequences, encode_tuples, budget: int = 256 << 20):
        self.encode_sequences, self.encode_tuples, self.budget = (encode_sequences,
                                                                  encode_tuples, budget)
        self.store: OrderedDict[bytes, tuple] = OrderedDict()
        self.size = self.encoded = 0

    def __call__(self, protos: np.ndarray, z: np.ndarray) -> dict:
        B, K, T = protos.shape
        if K == 0:  # nothing to encode: the encoder graph does not read these
            empty = np.zeros((B, 0, 1), np.float32)
            return self.encode_tuples(empty[..., None], empty, empty, protos, z)
        distinct, inverse = np.unique(protos.reshape(B * K, T), axis=0, return_inverse=True)
        names = [row.tobytes() for row in distinct]
        missing = [j for j, name in enumerate(names) if name not in self.store]
        fresh = {}
        if missing:
            results = self.encode_sequences(np.ascontiguousarray(distinct[missing]))
            self.encoded += len(missing)
            for n, j in enumerate(missing):  # copies: a kept row must not hold the batch
                fresh[names[j]] = tuple(np.array(a[n]) for a in results)
        rows = []
        for name in names:
            if name in fresh:
                rows.append(fresh[name])
            else:
                rows.append(self.store[name])
                self.store.move_to_end(name)
        for name, row in fresh.items():
            self._keep(name, row)
        order = inverse.ravel()
        gathered = [np.stack([rows[j][i] for j in order]).reshape(B, K, *rows[0][i].shape)
                    for i in range(3)]
        return self.encode_tuples(*gathered, protos, z)

    def _keep(self, name: bytes, row: tuple) -> None:
        size = sum(a.nbytes for a in row)
        if size > self.budget:
            return
        while self.size + size > self.budget:
            _, dropped = self.store.popitem(last=False)
            self.size -= sum(a.nbytes for a in dropped)
        self.store[name] = row
        self.size += size
