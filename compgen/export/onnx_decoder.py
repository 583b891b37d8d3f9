"""Sampling on the exported ONNX graphs with ONNX Runtime.

The CUDA execution provider is used when ONNX Runtime has one and a GPU is present,
the CPU provider otherwise. ``OnnxStepper`` is the graphs' step function for the shared
decode loop of ``compgen.decoding`` (the contract comes from the manifest): the memory is
bound once per batch, the state lives in preallocated buffers that ONNX Runtime writes in
place (IO binding, two sets swapped every step), each distinct prototype is encoded once
(``PrototypeCache``), and rows that finished are compacted out of the batch.
``precision="int8"`` runs the graphs with int8 weights (``compgen.export.reduced``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from compgen import cache
from compgen.decoding import STATE_NAMES, Contract, PrototypeCache
from compgen.errors import UserError

MEMORY_NAMES = ("keys", "values", "tokens", "mask", "z")


def providers() -> list[str]:
    import onnxruntime as ort

    available = ort.get_available_providers()
    if "CUDAExecutionProvider" in available and _gpu_present():
        return ["CUDAExecutionProvider", "CPUExecutionProvider"]
    return ["CPUExecutionProvider"]


def _gpu_present() -> bool:
    return any(Path("/dev").glob("nvidia[0-9]*"))


def open_session(path: Path, threads: int | None):
    """A session with every graph optimisation, intra-op threads = the cores (or
    ``threads``); the optimised graph is saved once next to the cache of the C++ runner
    and loaded from there afterwards (keyed by the graph's bytes)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads or os.cpu_count() or 1
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # the saved graph is for this machine: that is the point
    # idle pool threads sleep instead of spinning: on a shared machine (or next to torch's
    # or the C++ runner's threads) spinning threads steal the cores the work needs
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        optimised = _optimised_path(path)
        if optimised is None:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            return ort.InferenceSession(str(path), options, providers=providers())
        # the bytes checked against the cache's record are the bytes loaded
        content = cache.verified_bytes(optimised, "an optimised ONNX graph")
        if content is None:
            with cache.build_lock(optimised):
                content = cache.verified_bytes(optimised, "an optimised ONNX graph")
                if content is None:
                    _save_optimised(path, optimised, options)
                    cache.record(optimised)
                    content = cache.verified_bytes(optimised, "an optimised ONNX graph")
        if content is None:   # the cache cannot be written: optimise in memory
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            return ort.InferenceSession(str(path), options, providers=providers())
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return ort.InferenceSession(content, options, providers=providers())
    except Exception as exc:  # noqa: BLE001 (onnxruntime raises bare Exception subclasses)
        raise UserError(f"{path}: cannot load ONNX graph ({str(exc).splitlines()[0]})") from None


def _save_optimised(path: Path, optimised: Path, options) -> None:
    """Optimise ``path`` with every graph optimisation into ``optimised`` (staged, renamed)."""
    import onnxruntime as ort

    staged = optimised.with_name(f".{optimised.name}.{os.getpid()}")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(staged)
    try:
        ort.InferenceSession(str(path), options, providers=providers())
        if staged.is_file():
            os.replace(staged, optimised)
    finally:
        staged.unlink(missing_ok=True)
        options.optimized_model_filepath = ""


def _optimised_path(path: Path) -> Path | None:
    """Where the optimised copy of a graph is kept (per graph content and ORT version)."""
    import onnxruntime as ort

    if os.environ.get("COMPGEN_NO_ORT_CACHE"):
        return None
    digest = cache.file_digest(Path(path)).hexdigest()[:20]
    return cache.store("onnx") / f"{digest}-ort{ort.__version__}.onnx"


class OnnxGenerator:
    """The three graphs of an exported folder, and the decoding contract of its manifest."""

    def __init__(self, folder: str | os.PathLike, manifest: dict, threads: int | None = None,
                 precision: str = "fp32"):
        graphs = Path(folder)
        if precision == "int8":
            from compgen.export.reduced import int8_graphs

            graphs = int8_graphs(graphs)
        self.prototypes = open_session(graphs / "prototypes.onnx", threads)
        self.encoder = open_session(graphs / "encoder.onnx", threads)
        self.step = open_session(graphs / "decoder_step.onnx", threads)
        self.encoder_inputs = {i.name for i in self.encoder.get_inputs()}
        self.step_inputs = {i.name for i in self.step.get_inputs()}
        self.step_outputs = [o.name for o in self.step.get_outputs()]
        self.contract = Contract.from_manifest(manifest["decoding"])
        self.cache = PrototypeCache(self._encode_sequences, self._encode_tuples)

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

    def stepper(self) -> OnnxStepper:
        return OnnxStepper(self)

    def run_step(self, token: np.ndarray, state: dict, memory: dict) -> tuple[np.ndarray, dict]:
        feeds = {"token": token}
        feeds.update({k: state[k] for k in STATE_NAMES if k in self.step_inputs})
        feeds.update({k: memory[k] for k in MEMORY_NAMES if k in self.step_inputs})
        outs = dict(zip(self.step_outputs, self.step.run(None, feeds)))
        return outs["logp"], {k: outs.get(f"{k}_out", state[k]) for k in STATE_NAMES}

    def score(self, protos: np.ndarray, z: np.ndarray, target: np.ndarray) -> np.ndarray:
        """Teacher-forced per-step log-probs ``(B, L-1, V)`` of ``target`` (starts with <s>)."""
        memory = self.encode(protos, z)
        state = self.initial_state(memory)
        steps = []
        for t in range(target.shape[1] - 1):
            logp, state = self.run_step(target[:, t], state, memory)
            steps.append(logp)
        return np.stack(steps, 1)


class OnnxStepper:
    """Step function of the shared decode loop over an ``OnnxGenerator``."""

    def __init__(self, gen: OnnxGenerator):
        import onnxruntime as ort

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
