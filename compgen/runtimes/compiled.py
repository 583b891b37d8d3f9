"""``--backend torch --precision bf16``: prototypes encoded by the bf16 TorchScript
sampler's graph, the encoder and the decoder step by the libraries AOTInductor compiled
from them (``compgen.runtimes.inductor``, the C++ runner's), as a step function of the shared
decode loop (``compgen.decoding``)."""

from __future__ import annotations

from pathlib import Path

import torch

from compgen.decoding.prototypes import PrototypeCache
from compgen.errors import UserError
from compgen.runtimes.artifact import load_torchscript
from compgen.runtimes.inductor import LIBRARIES
from compgen.runtimes.manifest import Manifest
from compgen.runtimes.reduced import bf16_libraries, bf16_sampler
from compgen.runtimes.torchscript import GraphGenerator


class CompiledBf16Generator(GraphGenerator):
    """Prototypes encoded by the bf16 TorchScript sampler's graph, the encoder and the step
    by the compiled libraries."""

    def __init__(self, folder: Path, manifest: Manifest, threads: int | None = None):
        if threads:
            torch.set_num_threads(threads)
        # the C++ runner's libraries (its workers run one thread each): the same compiled
        # code, so the same samples; the matrix products still use every thread here
        libraries = bf16_libraries(folder, manifest)
        scripted = load_torchscript(bf16_sampler(folder, manifest)).prototypes
        self.bf16 = False  # the libraries carry their own casts; the prototype graph:

        def prototypes(seqs):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return scripted(seqs)

        self.prototypes = prototypes
        self.encoder, self.step = (_load(libraries / name) for name in LIBRARIES)
        self.contract = manifest.contract()
        self.cache = PrototypeCache(self._encode_sequences, self._encode_tuples)


def _load(path: Path):
    try:
        runner = torch._C._aoti.AOTIModelContainerRunnerCpu(str(path), 1)
    except Exception as error:  # noqa: BLE001 - a corrupt library fails in many ways
        text = str(error).strip()
        raise UserError(f"{path}: cannot load the compiled graph "
                        f"({text.splitlines()[0] if text else type(error).__name__})") from None

    def call(*args):
        # contiguous inputs: the compiled code assumes the strides it was built for
        return tuple(runner.run([a.contiguous() for a in args]))

    return call
