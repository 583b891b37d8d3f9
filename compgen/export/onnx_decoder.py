"""Sampling on the exported ONNX graphs with ONNX Runtime.

The CUDA execution provider is used when ONNX Runtime has one and a GPU is present,
the CPU provider otherwise. The decoding loop runs here in numpy over whole batches:
one ``decoder_step`` call per time step for the whole batch (or batch x beam). Random
draws come from a numpy Generator (Gumbel-max sampling), so a seed fixes the output.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from compgen.data.vocab import BOS_ID, EOS_ID, PAD_ID, SEP_ID
from compgen.errors import UserError
from compgen.sampling import banned_mask

STATE = ("h", "c", "feed", "step", "past_h", "past_key", "past_tok")


def providers() -> list[str]:
    import onnxruntime as ort

    available = ort.get_available_providers()
    if "CUDAExecutionProvider" in available and _gpu_present():
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def _gpu_present() -> bool:
    return any(Path("/dev").glob("nvidia[0-9]*"))


def open_session(path: Path, threads: int | None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or os.cpu_count() or 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    try:
        return ort.InferenceSession(str(path), options, providers=providers())
    except Exception as exc:  # noqa: BLE001 (onnxruntime raises bare Exception subclasses)
        raise UserError(f"{path}: cannot load ONNX graph ({str(exc).splitlines()[0]})") from None


class OnnxGenerator:
    """The two graphs of an exported folder, plus the state layout from its manifest."""

    def __init__(self, folder: str | os.PathLike, manifest: dict, threads: int | None = None):
        folder = Path(folder)
        self.encoder = open_session(folder / "encoder.onnx", threads)
        self.step = open_session(folder / "decoder_step.onnx", threads)
        self.encoder_inputs = {i.name for i in self.encoder.get_inputs()}
        self.step_inputs = {i.name for i in self.step.get_inputs()}
        self.step_outputs = [o.name for o in self.step.get_outputs()]
        model = manifest["model"]
        self.sig, self.hidden = model["variant"] == "sig", model["hidden"]
        self.feed_dim, self.latent = model["feed_dim"], model["latent"]
        self.vocab_size = model["vocab_size"]
        self.first_banned = banned_mask(self.vocab_size, True).numpy()
        self.later_banned = banned_mask(self.vocab_size, False).numpy()

    def encode(self, protos: np.ndarray, z: np.ndarray) -> dict:
        feeds = {k: v for k, v in (("protos", protos), ("z", z)) if k in self.encoder_inputs}
        keys, values, mask, h, c = self.encoder.run(None, feeds)
        return {"keys": keys, "values": values, "mask": mask, "tokens": protos, "z": z,
                "h": h, "c": c}

    def initial_state(self, enc: dict, max_steps: int) -> dict:
        B = enc["h"].shape[0]
        L = max_steps + 1 if self.sig else 0
        width = self.hidden if self.sig else 0
        return {"h": enc["h"], "c": enc["c"], "feed": np.zeros((B, self.feed_dim), np.float32),
                "step": np.zeros(B, np.int64), "past_h": np.zeros((B, L, width), np.float32),
                "past_key": np.zeros((B, L, width), np.float32),
                "past_tok": np.full((B, L), PAD_ID, np.int64)}

    def run_step(self, token: np.ndarray, state: dict, memory: dict) -> tuple[np.ndarray, dict]:
        feeds = {"token": token}
        for name in STATE:
            if name in self.step_inputs:
                feeds[name] = state[name]
        for name in ("keys", "values", "tokens", "mask", "z"):
            if name in self.step_inputs:
                feeds[name] = memory[name]
        outs = dict(zip(self.step_outputs, self.step.run(None, feeds)))
        new = {name: outs.get(f"{name}_out", state[name]) for name in STATE}
        return outs["logp"], new

    # IO binding: the memory is handed to ONNX Runtime once per batch and the state stays
    # in ONNX Runtime's own buffers from step to step; only log p comes back to numpy.
    # (Beam search reorders the state with numpy indexing, so it uses run_step.)
    def bind_memory(self, memory: dict) -> dict:
        import onnxruntime as ort

        return {name: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(memory[name]))
                for name in ("keys", "values", "tokens", "mask", "z") if name in self.step_inputs}

    def run_step_bound(self, token: np.ndarray, state: dict,
                       bound_memory: dict) -> tuple[np.ndarray, dict]:
        binding = self.step.io_binding()
        binding.bind_cpu_input("token", token)
        for name in STATE:
            if name in self.step_inputs:
                value = state[name]
                if isinstance(value, np.ndarray):
                    binding.bind_cpu_input(name, np.ascontiguousarray(value))
                else:
                    binding.bind_ortvalue_input(name, value)
        for name, value in bound_memory.items():
            binding.bind_ortvalue_input(name, value)
        for name in self.step_outputs:
            binding.bind_output(name, "cpu")
        self.step.run_with_iobinding(binding)
        outs = dict(zip(self.step_outputs, binding.get_outputs()))
        new = {name: outs.get(f"{name}_out", state[name]) for name in STATE}
        return outs["logp"].numpy(), new

    # ------------------------------------------------------------------ strategies
    def decode(self, protos: np.ndarray, z: np.ndarray, max_len: int, temperature: float,
               mode: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """mode 0 greedy, 1 temperature, 2 mixed (temperature before <sep>, greedy after).
        Returns tokens ``(B, L)`` (``<pad>`` after ``</s>``) and their log-probs."""
        memory = self.encode(protos, z)
        state = self.initial_state(memory, max_len)
        bound = self.bind_memory(memory)
        B = protos.shape[0]
        token = np.full(B, BOS_ID, np.int64)
        out = np.full((B, max_len), PAD_ID, np.int64)
        out_logp = np.zeros((B, max_len), np.float32)
        done = np.zeros(B, bool)
        after_sep = np.zeros(B, bool)
        rows = np.arange(B)
        for t in range(max_len):
            logp, state = self.run_step_bound(token, state, bound)
            logp = np.where(self.first_banned if t == 0 else self.later_banned, -np.inf, logp)
            nxt = logp.argmax(1)
            if mode != 0:
                gumbel = rng.gumbel(size=logp.shape).astype(np.float32)
                drawn = (logp / temperature + gumbel).argmax(1)
                nxt = np.where(after_sep, nxt, drawn) if mode == 2 else drawn
            nxt = np.where(done, PAD_ID, nxt)
            out[:, t] = nxt
            out_logp[:, t] = np.where(done, 0.0, logp[rows, nxt])
            after_sep |= nxt == SEP_ID
            done |= nxt == EOS_ID
            token = nxt
            if done.all():
                return out[:, : t + 1], out_logp[:, : t + 1]
        return out, out_logp

    def beam(self, protos: np.ndarray, z: np.ndarray, max_len: int,
             width: int) -> tuple[np.ndarray, np.ndarray]:
        """Beam search exactly as the eager sampler does it; returns the best hypothesis
        ``(B, L)`` and the per-token log-probs along it."""
        B, W, V = protos.shape[0], width, self.vocab_size
        memory = self.encode(np.repeat(protos, W, 0), np.repeat(z, W, 0))
        state = self.initial_state(memory, max_len)
        finished_row = np.full(V, -np.inf, np.float32)
        finished_row[PAD_ID] = 0.0
        scores = np.full((B, W), -np.inf, np.float32)
        scores[:, 0] = 0.0
        hist = np.full((B, W, max_len), PAD_ID, np.int64)
        hist_lp = np.zeros((B, W, max_len), np.float32)
        done = np.zeros((B, W), bool)
        token = np.full(B * W, BOS_ID, np.int64)
        offsets = (np.arange(B) * W)[:, None]
        for t in range(max_len):
            logp, state = self.run_step(token, state, memory)
            logp = np.where(self.first_banned if t == 0 else self.later_banned, -np.inf, logp)
            logp = np.where(done[:, :, None], finished_row, logp.reshape(B, W, V))
            cand = (scores[:, :, None] + logp).reshape(B, W * V)
            # top-W per row, best first (stable on ties like torch.topk is not guaranteed)
            flat = np.argsort(-cand, axis=1, kind="stable")[:, :W]
            scores = np.take_along_axis(cand, flat, 1)
            beam, tok = flat // V, flat % V
            hist = np.take_along_axis(hist, beam[:, :, None], 1)
            hist_lp = np.take_along_axis(hist_lp, beam[:, :, None], 1)
            hist[:, :, t] = tok
            hist_lp[:, :, t] = np.take_along_axis(logp.reshape(B, W * V), flat, 1)
            done = np.take_along_axis(done, beam, 1) | (tok == EOS_ID)
            index = (beam + offsets).ravel()
            state = {k: v[index] for k, v in state.items()}
            token = tok.ravel()
            if done.all():
                return hist[:, 0, : t + 1], hist_lp[:, 0, : t + 1]
        return hist[:, 0], hist_lp[:, 0]

    def score(self, protos: np.ndarray, z: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Teacher-forced per-step log-probs ``(B, L-1, V)`` of ``target`` (starts with <s>)."""
        memory = self.encode(protos, z)
        state = self.initial_state(memory, target.shape[1])
        steps = []
        for t in range(target.shape[1] - 1):
            logp, state = self.run_step(target[:, t], state, memory)
            steps.append(logp)
        return np.stack(steps, 1)
