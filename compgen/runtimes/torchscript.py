"""The TorchScript graphs of an export (``model.ts``: the traced prototype encoder, encoder
and decoder step) as a step function of the shared decode loop (``compgen.decoding``).
``precision="bf16"`` runs the bf16 sampler built from them (``compgen.runtimes.reduced``),
its graphs replayed under CPU bf16 autocast. On a CUDA device (fp32) the graphs, the
memory and the state live on the GPU; token ids go in and log-probabilities come out."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path

import numpy as np
import torch

from compgen.decoding.contract import STATE_NAMES, Contract
from compgen.decoding.prototypes import PrototypeCache
from compgen.runtimes.artifact import load_torchscript
from compgen.runtimes.manifest import Manifest


class TensorOps:
    """``PrototypeCache``'s operations on the encoder graph's tensors."""

    @staticmethod
    def copy(row: torch.Tensor) -> torch.Tensor:
        return row.clone()

    @staticmethod
    def nbytes(row: torch.Tensor) -> int:
        return row.numel() * row.element_size()

    @staticmethod
    def take(rows: list, index: np.ndarray) -> torch.Tensor:
        stacked = torch.stack(rows)
        slots = torch.arange(index.shape[1], device=stacked.device)
        return stacked[torch.from_numpy(index).to(stacked.device), slots]


class GraphGenerator:
    """Three graphs (``prototypes``, ``encoder``, ``step``, as in ``model.ts``) as a step
    function of the shared decode loop; a subclass sets them up, with ``bf16``, ``contract``
    and ``cache``."""

    prototypes: object
    encoder: object
    step: object
    bf16: bool
    contract: Contract
    cache: PrototypeCache
    device: torch.device | None = None   # None: the CPU

    def put(self, array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(array)
        return tensor if self.device is None else tensor.to(self.device)

    def host(self, tensor: torch.Tensor) -> np.ndarray:
        return tensor.numpy() if self.device is None else tensor.cpu().numpy()

    def running(self):
        """How the graphs run: the traced graph as it is (the profiling executor would
        re-specialise it for every batch size that compaction produces, 3-10x slower),
        under bf16 autocast for the bf16 sampler."""
        stack = contextlib.ExitStack()
        stack.enter_context(torch.no_grad())
        stack.enter_context(torch.jit.optimized_execution(False))
        if self.bf16:
            stack.enter_context(torch.autocast("cpu", dtype=torch.bfloat16))
        return stack

    def _encode_sequences(self, seqs: np.ndarray) -> list[np.ndarray]:
        with self.running():
            return [self.host(t) for t in self.prototypes(self.put(seqs))]

    def _encode_tuples(self, *arrays: np.ndarray) -> dict:
        """The memory as tensors (the bf16 sampler keeps keys and values in bf16)."""
        with self.running():
            keys, values, mask, h, c = self.encoder(*map(self.put, arrays))
        return {"keys": keys, "values": values, "mask": mask, "h": h, "c": c}

    def stepper(self) -> GraphStepper:
        return GraphStepper(self)


class TorchScriptGenerator(GraphGenerator):
    def __init__(self, folder: Path, manifest: Manifest, threads: int | None = None,
                 precision: str = "fp32", device=None):
        if device is not None and device.cuda:
            self.device = device.torch
        if threads:
            torch.set_num_threads(threads)
        path = Path(folder) / "model.ts"
        if precision == "bf16":
            # start-up: fp32 sampling loads no onnx (the bf16 sampler is built from the
            # export's ONNX graphs, once)
            from compgen.runtimes.reduced import bf16_sampler

            path = bf16_sampler(folder, manifest)
        self.module = load_torchscript(path, device)
        self.bf16 = bool(getattr(self.module, "bf16", False))
        self.prototypes, self.encoder, self.step = (self.module.prototypes, self.module.encoder,
                                                    self.module.step)
        if not self.bf16:
            # the step frozen (weights as constants) and optimised for inference: a linear
            # layer becomes a product with its weight transposed once, 1.7x faster per step
            # at batch 1. Frozen from a copy of its own (freezing edits the module types the
            # graphs share); the bf16 step runs as traced, as in the C++ runner.
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                self.step = torch.jit.optimize_for_inference(
                    load_torchscript(path, device).step.eval())
        self.contract = manifest.contract()
        # the attention memory kept per prototype where the products are exact fp32 CPU
        # ones (bf16 autocast and the GPU's kernels may sum by the batch's shape)
        exact = not self.bf16 and self.device is None
        self.cache = PrototypeCache(self._encode_sequences, self._encode_tuples,
                                    ops=TensorOps if exact else None)


class GraphStepper:
    def __init__(self, gen: GraphGenerator):
        self.gen = gen

    def start(self, protos: np.ndarray, z: np.ndarray) -> None:
        enc = self.gen.cache(protos, z)
        gen = self.gen
        state = gen.contract.initial_state(gen.host(enc["h"]), gen.host(enc["c"]))
        self.state = [gen.put(np.ascontiguousarray(state[k])) for k in STATE_NAMES]
        self.memory = [enc["keys"], enc["values"], gen.put(np.ascontiguousarray(protos)),
                       enc["mask"], gen.put(np.ascontiguousarray(z))]

    def step(self, token: np.ndarray) -> np.ndarray:
        with self.gen.running():
            logp, *self.state = self.gen.step(self.gen.put(token), *self.state, *self.memory)
        return self.gen.host(logp)

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        index = self.gen.put(rows)
        self.state = [t.index_select(0, index) for t in self.state]
        if memory:
            self.memory = [t.index_select(0, index) for t in self.memory]
