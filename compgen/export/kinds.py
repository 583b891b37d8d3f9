"""``compgen export CHECKPOINT``: the export kinds registered by checkpoint kind, and the
one entry point that reads a checkpoint's kind and runs its spec (``spec.export_with``)."""

from __future__ import annotations

from pathlib import Path

from compgen.errors import UserError
from compgen.export.generator import MAX_PROTOTYPES, GeneratorExport
from compgen.export.inflection import InflectionExport
from compgen.export.predictor import PredictorExport
from compgen.export.spec import ExportOptions, KindSpec, export_with
from compgen.runtimes.artifact import load_manifest
from compgen.runtimes.manifest import Manifest
from compgen.training.checkpoint import load_checkpoint

KINDS: dict[str, type[KindSpec]] = {
    spec.kind: spec for spec in (GeneratorExport, PredictorExport, InflectionExport)}


def kind_spec(checkpoint) -> type[KindSpec]:
    """The spec that exports ``checkpoint``: a checkpoint file's kind, or the kind of an
    export folder (exported again in the current format, where the kind allows it)."""
    if Path(checkpoint).is_dir():
        kind = load_manifest(checkpoint, older_ok=True).kind
        spec = KINDS.get(kind)
        if spec is None or not spec.re_exports:
            raise UserError(f"{checkpoint}: re-exporting a '{kind}' export folder is not "
                            "supported; export its checkpoint")
        return spec
    kind = load_checkpoint(checkpoint).kind
    if kind not in KINDS:
        known = [f"{spec.name} ('{name}')" for name, spec in KINDS.items()]
        raise UserError(f"{checkpoint}: a '{kind}' checkpoint; export takes "
                        f"{', '.join(known[:-1])} and {known[-1]} checkpoints")
    return KINDS[kind]


def export_checkpoint(checkpoint, out=None, *, parity_sets: int = 256, seed: int = 0,
                      data_dir=None, cpp_binary: Path | None = None, log=print,
                      max_prototypes: int = MAX_PROTOTYPES) -> Manifest:
    """Export a checkpoint of any registered kind (or a generator export folder) to ``out``
    (default ``exported/<name>``); returns the manifest. ``parity_sets`` is the number of
    prototype sets (generator) or sources (predictor, inflection) the validation decodes;
    ``seed``, ``cpp_binary`` and ``max_prototypes`` concern generators only (the C++ runner
    only runs generators)."""
    options = ExportOptions(parity_sets=parity_sets, seed=seed, data_dir=data_dir,
                            cpp_binary=cpp_binary, log=log, max_prototypes=max_prototypes)
    return export_with(kind_spec(checkpoint), checkpoint, out, options)
