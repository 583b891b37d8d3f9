"""Greedy and beam search for an exported predictor with ONNX Runtime.

The loops are ``greedy_search`` and ``beam_search`` of ``models/seq2seq.py`` written in
numpy, one ``decoder_step`` call per time step for the whole batch (or batch x beam). The
masks, token ids and the initial state come from the manifest's decoding contract, so
this file is also the reference for a runner in another language.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from compgen.device import CPU, Device, describe_sessions
from compgen.sampling.backends.onnx import open_session

STATE = ("h", "c", "feed")


def additive_mask(vocab_size: int, masked_ids: list[int], value: float) -> np.ndarray:
    mask = np.zeros(vocab_size, np.float32)
    mask[masked_ids] = value
    return mask


class OnnxPredictor:
    def __init__(self, folder: str | os.PathLike, manifest: dict, threads: int | None = None,
                 device: Device | None = None):
        folder = Path(folder)
        self.device = device or CPU
        self.encoder = open_session(folder / "encoder.onnx", threads, self.device)
        self.step = open_session(folder / "decoder_step.onnx", threads, self.device)
        self.encoder_outputs = [o.name for o in self.encoder.get_outputs()]
        self.step_inputs = {i.name for i in self.step.get_inputs()}
        self.step_outputs = [o.name for o in self.step.get_outputs()]
        self.hidden = manifest["model"]["hidden"]
        self.vocab_size = V = manifest["model"]["vocab_size"]
        dec = manifest["decoding"]
        self.bos, self.eos = dec["bos"], dec["eos"]
        self.first_mask = additive_mask(V, dec["first_step_masked"], dec["mask_value"])
        self.later_mask = additive_mask(V, dec["later_steps_masked"], dec["mask_value"])
        self.only_eos = np.full(V, -np.inf, np.float32)
        self.only_eos[self.eos] = 0.0

    @property
    def where(self) -> str:
        return describe_sessions(self.device, (self.encoder, self.step))

    def encode(self, source: np.ndarray) -> tuple[dict, dict]:
        """Source ids ``(B, T)`` -> (memory, initial state) as name -> array."""
        outs = dict(zip(self.encoder_outputs, self.encoder.run(None, {"source": source})))
        memory = {k: v for k, v in outs.items() if k not in ("h0", "c0")}
        feed = np.zeros((source.shape[0], self.hidden), np.float32)
        return memory, {"h": outs["h0"], "c": outs["c0"], "feed": feed}

    def run_step(self, token: np.ndarray, state: dict, memory: dict) -> tuple[np.ndarray, dict]:
        feeds = {"token": token, **state}
        feeds.update({k: v for k, v in memory.items() if k in self.step_inputs})
        outs = dict(zip(self.step_outputs, self.step.run(None, feeds)))
        return outs["logp"], {name: outs[f"{name}_out"] for name in STATE}

    def greedy(self, source: np.ndarray, max_len: int) -> tuple[np.ndarray, np.ndarray]:
        """Tokens ``(B, L)`` and the log-probability of each ``(B, L)``; stops once every
        row has emitted ``</s>``."""
        memory, state = self.encode(source)
        B = source.shape[0]
        token = np.full(B, self.bos, np.int64)
        done = np.zeros(B, bool)
        rows = np.arange(B)
        tokens, token_logp = [], []
        for t in range(max_len):
            logp, state = self.run_step(token, state, memory)
            token = (logp + (self.first_mask if t == 0 else self.later_mask)).argmax(1)
            tokens.append(token)
            token_logp.append(logp[rows, token])
            done |= token == self.eos
            if done.all():
                break
        return np.stack(tokens, 1), np.stack(token_logp, 1)

    def beam(self, source: np.ndarray, max_len: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Best hypothesis ``(B, L)`` and its log-probability ``(B,)``, as ``beam_search``."""
        B, V = source.shape[0], self.vocab_size
        memory, state = self.encode(source)
        memory = {k: np.repeat(v, width, 0) for k, v in memory.items()}
        state = {k: np.repeat(v, width, 0) for k, v in state.items()}
        scores = np.full((B, width), -np.inf, np.float32)
        scores[:, 0] = 0.0
        token = np.full(B * width, self.bos, np.int64)
        done = np.zeros(B * width, bool)
        history = np.zeros((B * width, 0), np.int64)
        rows = np.arange(B)[:, None] * width
        for t in range(max_len):
            logp, state = self.run_step(token, state, memory)
            mask = self.first_mask if t == 0 else self.later_mask
            logp = np.where(done[:, None], self.only_eos, logp + mask)
            candidates = (scores.reshape(-1, 1) + logp).reshape(B, width * V)
            # top-width per row, best first; stable, so ties go to the lower index
            index = np.argsort(-candidates, axis=1, kind="stable")[:, :width]
            scores = np.take_along_axis(candidates, index, 1)
            parent = (rows + index // V).reshape(-1)
            token = (index % V).reshape(-1)
            state = {k: v[parent] for k, v in state.items()}
            history = np.concatenate([history[parent], token[:, None]], 1)
            done = done[parent] | (token == self.eos)
            if done.all():
                break
        return history.reshape(B, width, -1)[:, 0], scores[:, 0]

    def score(self, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Teacher-forced per-step log-probs ``(B, L-1, V)`` of ``target`` (starts with <s>)."""
        memory, state = self.encode(source)
        steps = []
        for t in range(target.shape[1] - 1):
            logp, state = self.run_step(target[:, t], state, memory)
            steps.append(logp)
        return np.stack(steps, 1)
