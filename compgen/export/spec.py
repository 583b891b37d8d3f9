"""What an export kind is, and the steps every kind shares.

A kind (generator, predictor, inflection model) is a small ``KindSpec`` subclass,
registered by its checkpoint kind in ``compgen.export.kinds``. It says what the shared
steps cannot know:

* ``kind``, ``name``: the checkpoint's (and the manifest's) kind, and what messages call it;
* ``tolerance``, ``relative_logp``: how far per-step log-probs may part from the eager
  model's, and whether relative to |log p| (``artifact.logp_rel_diff``) or absolute;
* ``onnx_graphs``: the ONNX graphs it traces; their inputs and outputs go in the manifest;
* ``__init__``: read and check the checkpoint, pick the batch the parity check decodes;
* ``write``: trace the graphs (with their example inputs) and write the other files into
  the staging folder; return the ``Manifest`` (not yet sealed: no parity figures, no
  checksums);
* ``parity``: the eager model's decodes on the parity batch and every exported backend's,
  as a ``ParityRun``;
* ``finish``: the manifest with what it records once the parity check has run (optional).

``export_with`` runs a spec: read, write into a staging folder, measure every backend
against the eager model (``measure_parity``, the one parity check of every kind), refuse
or seal with checksums (``artifact.seal``), and only then move the folder into place.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import numpy as np

from compgen.io import refuse_overwriting_inputs
from compgen.runtimes.artifact import (
    TOLERANCE,
    default_output,
    logp_diff,
    logp_rel_diff,
    seal,
    staged_folder,
)
from compgen.runtimes.manifest import Manifest
from compgen.runtimes.onnx_export import graph_io


@dataclass(frozen=True)
class ExportOptions:
    parity_sets: int             # prototype sets (generators) or sources the parity check decodes
    seed: int                    # generators: seed of the stored prototype order
    data_dir: Path | None        # where the checkpoint's data set is read from
    cpp_binary: Path | None      # generators: the C++ runner to check as well
    log: Callable[[str], object]
    max_prototypes: int          # generators: prototype tuples stored


@dataclass
class ParityOutputs:
    """What the eager model or one exported backend produced on the parity batch."""

    outputs: dict[str, list]       # search ("greedy", "beam") -> output rows, as compared
    logp: np.ndarray | None = None  # per-step log p, teacher-forced on the eager rows
    extra: dict = field(default_factory=dict)  # figures only this kind measures


def same_outputs(search: str, eager: list, theirs: list) -> dict:
    return {f"{search}_identical": theirs == eager}


@dataclass
class ParityRun:
    """One parity check: the eager reference and the backends to measure against it.

    ``figures`` describes the check (sets or sources, tolerance, ...); the measured
    ``"backends"`` are filled in at that key (where the kind placed it, else at the end).
    ``steps`` (B, T) marks the teacher-forced steps compared: those a decoder reaches."""

    figures: dict
    eager: ParityOutputs
    steps: np.ndarray
    backends: dict[str, Callable[[], ParityOutputs]]   # decoded one backend at a time
    compare: Callable[[str, list, list], dict] = same_outputs


def measure_parity(run: ParityRun, relative_logp: bool) -> dict:
    """Every backend's outputs and log-probs against the eager model's: the parity figures
    ``artifact.seal`` records, or refuses the folder over."""
    figures = dict(run.figures)
    figures["backends"] = {}
    for name, decode in run.backends.items():
        theirs = decode()
        found = {}
        for search, eager in run.eager.outputs.items():
            found.update(run.compare(search, eager, theirs.outputs[search]))
        if theirs.logp is not None:
            found["max_abs_logp_diff"] = logp_diff(theirs.logp, run.eager.logp, run.steps)
            if relative_logp:
                found["max_rel_logp_diff"] = logp_rel_diff(theirs.logp, run.eager.logp,
                                                           run.steps)
        figures["backends"][name] = {**found, **theirs.extra}
    return figures


class KindSpec:
    """One model kind's export (see the module docstring); one instance per export."""

    kind: ClassVar[str]
    name: ClassVar[str]
    tolerance: ClassVar[float] = TOLERANCE
    relative_logp: ClassVar[bool] = False
    onnx_graphs: ClassVar[tuple[str, ...]] = ("encoder.onnx", "decoder_step.onnx")
    re_exports: ClassVar[bool] = False   # an export folder of this kind can be exported again

    def __init__(self, checkpoint: Path, options: ExportOptions):
        raise NotImplementedError

    def write(self, folder: Path) -> Manifest:
        raise NotImplementedError

    def parity(self, folder: Path, manifest: Manifest) -> ParityRun:
        raise NotImplementedError

    def finish(self, folder: Path, manifest: Manifest) -> Manifest:
        """The manifest with what it records after the parity check (nothing by default)."""
        return manifest

    def graph_ios(self, folder: Path) -> dict:
        """The manifest's ``graphs``: inputs and outputs of each traced ONNX graph."""
        return {name: graph_io(folder / name) for name in self.onnx_graphs}


def export_with(spec: type[KindSpec], checkpoint, out, options: ExportOptions) -> Manifest:
    """Export ``checkpoint`` as ``spec`` says to ``out`` (default ``exported/<name>``);
    returns the manifest. The folder is moved into place only once every backend passed."""
    checkpoint = Path(checkpoint)
    out = Path(out) if out else default_output(checkpoint)
    refuse_overwriting_inputs(out, [("checkpoint", checkpoint)], "`output`")
    start = time.perf_counter()
    job = spec(checkpoint, options)
    with staged_folder(out) as tmp:
        manifest = job.write(tmp)
        figures = measure_parity(job.parity(tmp, manifest), spec.relative_logp)
        manifest = seal(tmp, job.finish(tmp, manifest), figures, checkpoint, start)
    return manifest
