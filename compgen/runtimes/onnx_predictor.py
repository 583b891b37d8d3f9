"""An exported predictor's ONNX graphs with ONNX Runtime, as a step function of the decoding
core (``compgen.decoding``): ``encoder.onnx`` once per source batch, ``decoder_step.onnx``
once per time step for the whole batch (or batch x beam). The masks, token ids and the
initial state come from the manifest's decoding contract.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from compgen.decoding.teacher_forcing import teacher_forced_logp
from compgen.device import CPU, Device, describe_sessions
from compgen.models.seq2seq import run_beam, run_greedy
from compgen.runtimes.manifest import Manifest
from compgen.runtimes.onnx import open_session

STATE = ("h", "c", "feed")


class OnnxPredictor:
    def __init__(self, folder: str | os.PathLike, manifest: Manifest, threads: int | None = None,
                 device: Device | None = None):
        folder = Path(folder)
        self.device = device or CPU
        self.encoder = open_session(folder / "encoder.onnx", threads, self.device)
        self.step_session = open_session(folder / "decoder_step.onnx", threads, self.device)
        self.encoder_outputs = [o.name for o in self.encoder.get_outputs()]
        self.step_inputs = {i.name for i in self.step_session.get_inputs()}
        self.step_outputs = [o.name for o in self.step_session.get_outputs()]
        self.hidden = manifest.hidden
        self.rules = manifest.step_rules()

    @property
    def where(self) -> str:
        return describe_sessions(self.device, (self.encoder, self.step_session))

    def encode(self, source: np.ndarray) -> tuple[dict, dict]:
        """Source ids ``(B, T)`` -> (memory, initial state) as name -> array."""
        outs = dict(zip(self.encoder_outputs, self.encoder.run(None, {"source": source})))
        memory = {k: v for k, v in outs.items() if k not in ("h0", "c0")}
        feed = np.zeros((source.shape[0], self.hidden), np.float32)
        return memory, {"h": outs["h0"], "c": outs["c0"], "feed": feed}

    def run_step(self, token: np.ndarray, state: dict, memory: dict) -> tuple[np.ndarray, dict]:
        feeds = {"token": token, **state}
        feeds.update({k: v for k, v in memory.items() if k in self.step_inputs})
        outs = dict(zip(self.step_outputs, self.step_session.run(None, feeds)))
        return outs["logp"], {name: outs[f"{name}_out"] for name in STATE}

    # the Stepper protocol
    def start(self, source) -> None:
        self.memory, self.state = self.encode(np.asarray(source))

    def step(self, token: np.ndarray) -> np.ndarray:
        logp, self.state = self.run_step(token, self.state, self.memory)
        return logp

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        self.state = {k: v[rows] for k, v in self.state.items()}
        if memory:
            self.memory = {k: v[rows] for k, v in self.memory.items()}

    def greedy(self, source: np.ndarray, max_len: int) -> tuple[np.ndarray, np.ndarray]:
        """Tokens ``(B, L)`` and the log-probability of each ``(B, L)``, as ``greedy_search``."""
        return run_greedy(self, self.rules, source, max_len)

    def beam(self, source: np.ndarray, max_len: int, width: int) -> tuple[np.ndarray, np.ndarray]:
        """Best hypothesis ``(B, L)`` and its log-probability ``(B,)``, as ``beam_search``."""
        return run_beam(self, self.rules, source, width, max_len)

    def score(self, source: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Teacher-forced per-step log-probs ``(B, L-1, V)`` of ``target`` (starts with <s>)."""
        memory, state = self.encode(source)
        return teacher_forced_logp(lambda token, state: self.run_step(token, state, memory),
                                   target, state)
