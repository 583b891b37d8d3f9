"""Sampling on the exported ONNX graphs with ONNX Runtime.

The CPU provider runs the graphs unless the device (``compgen.device``) is CUDA, then
ONNX Runtime's CUDA provider does, with the recurrent state kept in the GPU's memory
(``OnnxCudaStepper``). ``OnnxStepper`` is the graphs' step function for the shared
decode loop of ``compgen.decoding`` (the contract comes from the manifest): the memory is
bound once per batch, the state lives in preallocated buffers that ONNX Runtime writes in
place (IO binding, two sets swapped every step), each distinct prototype is encoded once
(``PrototypeCache``), and rows that finished are compacted out of the batch.
``precision="int8"`` runs the graphs with int8 weights (``compgen.runtimes.reduced``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnxruntime as ort

from compgen.decoding.contract import STATE_NAMES
from compgen.decoding.prototypes import ArrayOps, PrototypeCache
from compgen.decoding.teacher_forcing import teacher_forced_logp
from compgen.device import CPU, Device, describe_sessions, ort_session
from compgen.errors import UserError
from compgen.runtimes.manifest import Manifest
from compgen.system import cache

MEMORY_NAMES = ("keys", "values", "tokens", "mask", "z")


def open_session(path: Path, threads: int | None, device: Device | None = None):
    """A session on ``device`` (default: the CPU) with every graph optimisation, intra-op
    threads = the cores (or ``threads``); the optimised graph is saved once next to the
    cache of the C++ runner and loaded from there afterwards (keyed by the graph's bytes
    and the provider: an optimised graph holds the provider's own fused nodes)."""
    device = device or CPU

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or os.cpu_count() or 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # the saved graph is for this machine: that is the point
    # idle pool threads sleep instead of spinning: on a shared machine (or next to torch's
    # or the C++ runner's threads) spinning threads steal the cores the work needs
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        optimised = _optimised_path(path, device.ort_provider)
        if optimised is None:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            return ort_session(str(path), options, device)
        # the bytes checked against the cache's record are the bytes loaded
        content = cache.verified_bytes(optimised, "an optimised ONNX graph")
        if content is None:
            with cache.build_lock(optimised):
                content = cache.verified_bytes(optimised, "an optimised ONNX graph")
                if content is None:
                    _save_optimised(path, optimised, options, device)
                    cache.record(optimised)
                    content = cache.verified_bytes(optimised, "an optimised ONNX graph")
        if content is None:   # the cache cannot be written: optimise in memory
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            return ort_session(str(path), options, device)
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return ort_session(content, options, device)
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 (onnxruntime raises bare Exception subclasses)
        raise UserError(f"{path}: cannot load ONNX graph ({str(exc).splitlines()[0]})") from None


def _save_optimised(path: Path, optimised: Path, options, device: Device) -> None:
    """Optimise ``path`` with every graph optimisation into ``optimised`` (staged, renamed)."""
    staged = optimised.with_name(f".{optimised.name}.{os.getpid()}")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(staged)
    try:
        ort_session(str(path), options, device)
        if staged.is_file():
            os.replace(staged, optimised)
    finally:
        staged.unlink(missing_ok=True)
        options.optimized_model_filepath = ""


def _optimised_path(path: Path, provider: str = "CPUExecutionProvider") -> Path | None:
    """Where the optimised copy of a graph is kept (per graph content, ORT version and
    provider: an optimised graph holds the provider's own fused nodes)."""
    if os.environ.get("COMPGEN_NO_ORT_CACHE"):
        return None
    digest = cache.file_digest(Path(path)).hexdigest()[:20]
    return cache.store("onnx") / f"{digest}-ort{ort.__version__}-{provider}.onnx"


class OnnxGenerator:
    """The three graphs of an exported folder, and the decoding contract of its manifest."""

    def __init__(self, folder: str | os.PathLike, manifest: Manifest, threads: int | None = None,
                 precision: str = "fp32", device: Device | None = None):
        graphs = Path(folder)
        if precision == "int8":
            # start-up: `compgen sample --backend onnx` loads no torch (int8 graphs: the
            # export package quantises them once)
            from compgen.runtimes.reduced import int8_graphs

            graphs = int8_graphs(graphs)
        self.device = device or CPU
        self.prototypes = open_session(graphs / "prototypes.onnx", threads, self.device)
        self.encoder = open_session(graphs / "encoder.onnx", threads, self.device)
        self.step = open_session(graphs / "decoder_step.onnx", threads, self.device)
        self.encoder_inputs = {i.name for i in self.encoder.get_inputs()}
        self.step_inputs = {i.name for i in self.step.get_inputs()}
        self.step_outputs = [o.name for o in self.step.get_outputs()]
        self.contract = manifest.contract()
        # the attention memory kept per prototype where the products are exact fp32 CPU
        # ones (int8 graphs quantise each batch's activations with the batch's own scale)
        exact = precision == "fp32" and not self.device.cuda
        self.cache = PrototypeCache(self._encode_sequences, self._encode_tuples,
                                    ops=ArrayOps if exact else None)

    def _encode_sequences(self, seqs: np.ndarray) -> list[np.ndarray]:
        return self.prototypes.run(None, {"seqs": seqs})

    def _encode_tuples(self, encoded, h_final, c_final, protos, z) -> dict:
        given = {"encoded": encoded, "h_final": h_final, "c_final": c_final, "protos": protos,
                 "z": z}
        feeds = {k: v for k, v in given.items() if k in self.encoder_inputs}
        keys, values, mask, h, c = self.encoder.run(None, feeds)
        return {"keys": keys, "values": values, "mask": mask, "h": h, "c": c}

    def encode(self, protos: np.ndarray, z: np.ndarray) -> dict:
        """Memory (and h, c) of a batch: cached prototype encodings, z, tokens."""
        return {**self.cache(protos, z), "tokens": protos, "z": z}

    def initial_state(self, enc: dict) -> dict:
        return self.contract.initial_state(enc["h"], enc["c"])

    @property
    def where(self) -> str:
        """The device and the providers the sessions really run on."""
        return describe_sessions(self.device, (self.prototypes, self.encoder, self.step))

    def stepper(self) -> OnnxStepper:
        return OnnxCudaStepper(self) if self.device.cuda else OnnxStepper(self)

    def run_step(self, token: np.ndarray, state: dict, memory: dict) -> tuple[np.ndarray, dict]:
        feeds = {"token": token}
        feeds.update({k: state[k] for k in STATE_NAMES if k in self.step_inputs})
        feeds.update({k: memory[k] for k in MEMORY_NAMES if k in self.step_inputs})
        outs = dict(zip(self.step_outputs, self.step.run(None, feeds)))
        return outs["logp"], {k: outs.get(f"{k}_out", state[k]) for k in STATE_NAMES}

    def score(self, protos: np.ndarray, z: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Teacher-forced per-step log-probs ``(B, L-1, V)`` of ``target`` (starts with <s>)."""
        memory = self.encode(protos, z)
        return teacher_forced_logp(lambda token, state: self.run_step(token, state, memory),
                                   target, self.initial_state(memory))


class OnnxStepper:
    """Step function of the shared decode loop over an ``OnnxGenerator``."""

    def __init__(self, gen: OnnxGenerator):
        self.gen, self.ort = gen, ort
        self.inputs = [k for k in STATE_NAMES if k in gen.step_inputs]
        self.outputs = [k for k in STATE_NAMES if f"{k}_out" in gen.step_outputs]

    def start(self, protos: np.ndarray, z: np.ndarray) -> None:
        memory = self.gen.encode(protos, z)
        self.memory = {k: np.ascontiguousarray(memory[k]) for k in MEMORY_NAMES
                       if k in self.gen.step_inputs}
        self._bind(self.gen.initial_state(memory))

    def _bind(self, state: dict) -> None:
        """Preallocate both state buffer sets for this batch size and bind the memory."""
        ort = self.ort
        self.state = {k: np.ascontiguousarray(v) for k, v in state.items()}
        self.spare = {k: np.empty_like(self.state[k]) for k in self.outputs}
        B = next(iter(self.memory.values())).shape[0] if self.memory else len(state["h"])
        self.logp = np.empty((B, self.gen.contract.vocab_size), np.float32)
        self.binding = self.gen.step.io_binding()
        for k, v in self.memory.items():
            self.binding.bind_ortvalue_input(k, ort.OrtValue.ortvalue_from_numpy(v))
        self.binding.bind_ortvalue_output("logp", ort.OrtValue.ortvalue_from_numpy(self.logp))
        bound = [self.state[k] for k in {*self.inputs, *self.outputs}] + list(self.spare.values())
        self.values = {id(v): ort.OrtValue.ortvalue_from_numpy(v) for v in bound}

    def step(self, token: np.ndarray) -> np.ndarray:
        binding = self.binding
        binding.bind_cpu_input("token", np.ascontiguousarray(token, np.int64))
        for k in self.inputs:
            binding.bind_ortvalue_input(k, self.values[id(self.state[k])])
        for k in self.outputs:
            binding.bind_ortvalue_output(f"{k}_out", self.values[id(self.spare[k])])
        self.gen.step.run_with_iobinding(binding)
        for k in self.outputs:  # the outputs become the next step's inputs
            self.state[k], self.spare[k] = self.spare[k], self.state[k]
        return self.logp

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        if memory:
            self.memory = {k: np.ascontiguousarray(v[rows]) for k, v in self.memory.items()}
            self._bind({k: v[rows] for k, v in self.state.items()})
            return
        state = {k: v[rows] for k, v in self.state.items()}
        for k, v in state.items():
            np.copyto(self.state[k], v)  # same batch size: reorder in place


class OnnxCudaStepper(OnnxStepper):
    """``OnnxStepper`` on the CUDA provider: the memory and both state buffer sets live in
    the GPU's memory, so a step copies only the token ids in and the log-probabilities out.
    Compacting rows (rare: when rows finish) brings the state through the host once.
    ``where`` places the buffers (ONNX Runtime's device name and index; the CPU's runs
    the same code without a GPU)."""

    def __init__(self, gen: OnnxGenerator, where: tuple[str, int] | None = None):
        super().__init__(gen)
        self.where = where or ("cuda", gen.device.index)

    def _bind(self, state: dict) -> None:
        ort, where = self.ort, self.where
        B = next(iter(self.memory.values())).shape[0] if self.memory else len(state["h"])
        self.logp = np.empty((B, self.gen.contract.vocab_size), np.float32)
        self.binding = self.gen.step.io_binding()
        for k, v in self.memory.items():
            self.binding.bind_ortvalue_input(k, ort.OrtValue.ortvalue_from_numpy(v, *where))
        self.binding.bind_ortvalue_output("logp", ort.OrtValue.ortvalue_from_numpy(self.logp))
        self.state = {k: ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(v), *where)
                      for k, v in state.items()}
        self.spare = {k: ort.OrtValue.ortvalue_from_shape_and_type(
            self.state[k].shape(), np.asarray(state[k]).dtype.type, *where) for k in self.outputs}

    def step(self, token: np.ndarray) -> np.ndarray:
        binding = self.binding
        binding.bind_cpu_input("token", np.ascontiguousarray(token, np.int64))
        for k in self.inputs:
            binding.bind_ortvalue_input(k, self.state[k])
        for k in self.outputs:
            binding.bind_ortvalue_output(f"{k}_out", self.spare[k])
        self.gen.step.run_with_iobinding(binding)
        for k in self.outputs:  # the outputs become the next step's inputs
            self.state[k], self.spare[k] = self.spare[k], self.state[k]
        return self.logp

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        state = {k: v.numpy()[rows] for k, v in self.state.items()}
        if memory:
            self.memory = {k: np.ascontiguousarray(v[rows]) for k, v in self.memory.items()}
            self._bind(state)
            return
        for k, v in state.items():  # same batch size: overwrite the buffers in place
            self.state[k].update_inplace(np.ascontiguousarray(v))
