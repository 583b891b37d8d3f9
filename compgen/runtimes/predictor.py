"""Predictions from an exported predictor folder with any backend: ONNX Runtime,
TorchScript, or the eager model the folder was exported from.

``predict_exported`` takes token lists and returns token lists, like
``compgen.models.metrics.predict`` on a checkpoint: sources are sorted by length and decoded in
batches (the encoder is batch-independent, so the order does not change a prediction),
greedy by default or beam search with ``beam_width > 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from compgen.data.vocab import Vocab
from compgen.device import CPU, Device
from compgen.errors import SettingError, UserError
from compgen.models.seq2seq import PredictorStepper, predict_sources, search_rows
from compgen.runtimes.artifact import load_manifest, load_torchscript
from compgen.runtimes.backend_check import check_predictor_backends
from compgen.runtimes.manifest import Manifest
from compgen.runtimes.onnx_predictor import OnnxPredictor
from compgen.runtimes.torchscript_predictor import TorchScriptPredictor
from compgen.training.predictor import load_predictor

BACKENDS = ("onnx", "torchscript", "torch")


def batch_decoder(folder: Path, manifest: Manifest, backend: str, beam_width: int,
                  threads: int | None, device: Device | None = None
                  ) -> Callable[[torch.Tensor], list[list[int]]]:
    """``decode(source ids (B, T)) -> rows of output ids`` for one backend on ``device``
    (default: the CPU): the backend's step function under the decoding core's search."""
    device = device or CPU
    if backend == "onnx":
        stepper = OnnxPredictor(folder, manifest, threads, device)
    elif backend in ("torchscript", "torch"):
        if threads:
            torch.set_num_threads(threads)
        if backend == "torchscript":
            stepper = TorchScriptPredictor(load_torchscript(folder / "model.ts", device), device)
        else:
            stepper = PredictorStepper(load_predictor(folder / "predictor.pt")[0].to(device.torch))
    else:
        raise SettingError(f"`backend` {backend}: unknown (valid: {', '.join(BACKENDS)})")
    return search_rows(stepper, manifest.step_rules(), beam_width, manifest.max_len)


def predict_exported(folder, sources: Sequence[Sequence[str]], *, backend: str = "onnx",
                     batch_size: int = 256, beam_width: int = 0,
                     threads: int | None = None, device: Device | None = None
                     ) -> list[list[str]]:
    """Predicted token lists for ``sources`` (token lists) from an export folder, decoded
    on ``device`` (default: the CPU)."""
    if backend not in BACKENDS:
        raise SettingError(f"`backend` {backend}: unknown (valid: {', '.join(BACKENDS)})")
    folder = Path(folder)
    manifest = load_manifest(folder)
    if manifest.kind != "seq2seq":
        raise UserError(f"{folder}: a '{manifest.kind}' export, not a predictor "
                        "(export a seq2seq checkpoint)")
    if batch_size < 1:
        raise SettingError("`batch_size` must be >= 1")
    check_predictor_backends(folder, manifest)
    vocab = Vocab.load(folder / "vocab.json")
    decode = batch_decoder(folder, manifest, backend, beam_width, threads, device)
    return predict_sources(decode, vocab, sources, batch_size, manifest.max_len)
