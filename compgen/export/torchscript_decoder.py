"""The TorchScript graphs of an export (``model.ts``: the traced encoder and decoder step)
as a step function of the shared decode loop (``compgen.decoding``)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from compgen.decoding import STATE_NAMES, Contract, EncodingCache


class TorchScriptGenerator:
    def __init__(self, folder: Path, manifest: dict, threads: int | None = None):
        if threads:
            torch.set_num_threads(threads)
        self.module = torch.jit.load(str(Path(folder) / "model.ts"))
        self.contract = Contract.from_manifest(manifest["decoding"])
        self.cache = EncodingCache(self._encode)

    @torch.no_grad()
    def _encode(self, protos: np.ndarray, z: np.ndarray) -> dict:
        with torch.jit.optimized_execution(False):
            keys, values, mask, h, c = self.module.encoder(torch.from_numpy(protos),
                                                           torch.from_numpy(z))
        return {"keys": keys.numpy(), "values": values.numpy(), "mask": mask.numpy(),
                "h": h.numpy(), "c": c.numpy()}

    def stepper(self) -> TorchScriptStepper:
        return TorchScriptStepper(self)


class TorchScriptStepper:
    def __init__(self, gen: TorchScriptGenerator):
        self.gen = gen

    def start(self, protos: np.ndarray, z: np.ndarray, tuple_ids=None) -> None:
        enc = self.gen.cache(protos, z, tuple_ids)
        state = self.gen.contract.initial_state(enc["h"], enc["c"])
        self.state = [torch.from_numpy(np.ascontiguousarray(state[k])) for k in STATE_NAMES]
        self.memory = [torch.from_numpy(np.ascontiguousarray(a)) for a in
                       (enc["keys"], enc["values"], protos, enc["mask"], z)]

    @torch.no_grad()
    def step(self, token: np.ndarray) -> np.ndarray:
        # the profiling executor would re-specialise the graph for every batch size that
        # compaction produces (3-10x slower here); the traced graph is already what runs
        with torch.jit.optimized_execution(False):
            logp, *self.state = self.gen.module.step(torch.from_numpy(token), *self.state,
                                                     *self.memory)
        return logp.numpy()

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        index = torch.from_numpy(rows)
        self.state = [t.index_select(0, index) for t in self.state]
        if memory:
            self.memory = [t.index_select(0, index) for t in self.memory]
