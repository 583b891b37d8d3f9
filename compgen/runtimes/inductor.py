"""The bf16 encoder and decoder step compiled ahead of time by TorchInductor
(AOTInductor): built from the eager model of an export, run by ``--backend torch
--precision bf16`` (here, a step function of the shared decode loop ``compgen.decoding``)
and by ``--backend cpp --precision bf16`` (the C++ runner loads the same libraries);
prototypes are encoded by the bf16 TorchScript sampler's graph in both (its fused LSTM:
AOTInductor unrolls the LSTM into per-step products, 2.4x slower).

Why a compiler: the bf16 TorchScript sampler runs op by op, so at batch 256 its time goes
to casts between fp32 and bf16, elementwise ops on bf16 tensors and matrix products that
re-lay out their weights on every call. Inductor with frozen weights fuses the elementwise
ops and casts into generated C++ loops and keeps every weight pre-packed for oneDNN's bf16
(AMX) kernels (scripts/bench/bench_sampling.py measures the gain). The graphs are the
``EncoderGraph`` / ``StepGraph`` wrappers the exports are made of, over a bf16 copy of the
weights, under CPU bf16 autocast, as the bf16 TorchScript sampler
(``compgen.runtimes.torchscript_trace``) is traced from; their floating outputs are fp32 except
the attention memory, kept in bf16 (``Bf16Graph``).

The batch size is dynamic, so one library serves every batch that compaction produces;
prototypes are padded to the contract's width, as every runtime pads them. The libraries
are built once per export (``compgen.runtimes.reduced``; about 30 s, which needs a C++
compiler and the Python headers) and kept in the user's cache; their generated loops run
on one thread, as the C++ runner's workers do, and ``--backend torch`` runs the same
libraries (its matrix products still use every thread), so both give the same samples.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

import torch
from torch import nn

from compgen.errors import SettingError
from compgen.runtimes.graphs import EncoderGraph, StepGraph, example_inputs
from compgen.runtimes.torchscript_trace import Bf16Graph, bf16_copy

# the compiled graphs: shared libraries taken out of their AOTInductor packages (a
# package is unpacked into a new folder in the system temp dir on every load)
LIBRARIES = ("encoder.so", "step.so")


class AutocastGraph(Bf16Graph):
    """``Bf16Graph`` with the autocast inside: a compiled graph carries its own casts."""

    def forward(self, *args):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return super().forward(*args)


def build_libraries(model: nn.Module, target: Path, width: int) -> None:
    """The encoder's and the step's libraries compiled by AOTInductor from a deterministic
    ``model``, in the folder ``target`` (which exists): prototypes padded to ``width`` (the decoding
    contract's), any batch size."""
    model = bf16_copy(model)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        # a batch of 3 (equal to no width of the model, so export keeps it a variable)
        _, enc_args, step_args = example_inputs(model, batch=3, length=width, max_steps=8)
    # the dtypes the graphs are fed at run time: fp32 (``Bf16Graph``'s outputs), except
    # the attention memory's keys and values, which stay bf16
    enc_args = tuple(a.float() if a.is_floating_point() else a for a in enc_args)
    step_args = tuple(a.to(torch.bfloat16) if i in (8, 9) else a.float() if a.is_floating_point()
                      else a for i, a in enumerate(step_args))
    # distinct contiguous tensors: export takes one tensor passed twice (scan's zero h and
    # c) as one input read twice, and compiled code assumes the strides it was built for
    args = tuple(tuple(a.clone(memory_format=torch.contiguous_format) for a in inputs)
                 for inputs in (enc_args, step_args))
    graphs = (AutocastGraph(EncoderGraph(model), keep=(0, 1)), AutocastGraph(StepGraph(model)))
    configs = {"freezing": True,  # weights as constants Inductor may pre-pack
               # one thread, as each of the C++ runner's workers runs
               "cpp.threads": 1,
               # they would go to a folder in the system temp dir, whatever the cache dir
               "cpp_cache_precompile_headers": False,
               "aot_inductor.precompile_headers": False}
    for name, graph, inputs in zip(LIBRARIES, graphs, args):
        batch = torch.export.Dim("batch", min=1, max=1 << 20)
        dynamic = tuple({0: batch} for _ in inputs)
        package = target / (name + ".pt2")
        with torch.no_grad():
            program = torch.export.export(graph.eval(), inputs, dynamic_shapes=(dynamic,))
            torch._inductor.aoti_compile_and_package(program, package_path=str(package),
                                                     inductor_configs=configs)
        with zipfile.ZipFile(package) as archive:  # one library, the weights inside it
            (member,) = [m for m in archive.namelist() if m.endswith(".wrapper.so")]
            (target / name).write_bytes(archive.read(member))
        package.unlink()


def find_compiler() -> str:
    """The C++ compiler Inductor will build with (``$CXX`` or g++), found before the model
    is traced, so a missing one is refused in a second rather than after the trace."""
    # start-up: torch's compiler loads only for a build
    from torch._inductor import cpp_builder

    return cpp_builder.get_cpp_compiler()


def compile_error(error: Exception) -> SettingError:
    text = str(error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    return SettingError("`precision` bf16 with `backend` torch or cpp compiles the model with "
                        "TorchInductor, which failed (it needs a C++ compiler and the Python "
                        f"headers): {first[:300]}")
