"""Predictions from an exported predictor folder with any backend: ONNX Runtime,
TorchScript, or the eager model the folder was exported from.

``predict_exported`` takes token lists and returns token lists, like
``compgen.evaluation.metrics.predict`` on a checkpoint: sources are sorted by length and decoded in
batches (the encoder is batch-independent, so the order does not change a prediction),
greedy by default or beam search with ``beam_width > 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from compgen.data.vocab import Vocab
from compgen.device import CPU, Device
from compgen.errors import UserError
from compgen.export.artifact import load_manifest, load_torchscript
from compgen.models.seq2seq import beam_search, collate, cut_prediction, greedy_search
from compgen.sampling.verify import check_predictor_backends

BACKENDS = ("onnx", "torchscript", "torch")


def batch_decoder(folder: Path, manifest: dict, backend: str, beam_width: int,
                  threads: int | None, device: Device | None = None
                  ) -> Callable[[torch.Tensor], list[list[int]]]:
    """``decode(source ids (B, T)) -> rows of output ids`` for one backend on ``device``
    (default: the CPU)."""
    max_len = manifest["decoding"]["max_len"]
    beam = beam_width > 1
    device = device or CPU

    if backend == "onnx":
        from compgen.sampling.backends.onnx_predictor import OnnxPredictor

        onnx = OnnxPredictor(folder, manifest, threads, device)

        def decode(source):
            src = source.numpy()
            out = onnx.beam(src, max_len, beam_width) if beam else onnx.greedy(src, max_len)
            return out[0].tolist()
        return decode

    if threads:
        torch.set_num_threads(threads)
    if backend == "torchscript":
        scripted = load_torchscript(folder / "model.ts", device)

        def decode(source):
            source = source.to(device.torch)
            with torch.no_grad():
                out = (scripted.beam(source, max_len, beam_width) if beam
                       else scripted.greedy(source, max_len))
            return out[0].tolist()
        return decode

    if backend == "torch":
        from compgen.training.predictor import load_predictor

        model = load_predictor(folder / "predictor.pt")[0].to(device.torch)

        def decode(source):
            source = source.to(device.torch)
            if beam:
                return beam_search(model, source, beam_width, max_len)[0].tolist()
            return greedy_search(model, source, max_len).tolist()
        return decode

    raise UserError(f"--backend {backend}: unknown (valid: {', '.join(BACKENDS)})")


def predict_exported(folder, sources: Sequence[Sequence[str]], *, backend: str = "onnx",
                     batch_size: int = 256, beam_width: int = 0,
                     threads: int | None = None, device: Device | None = None
                     ) -> list[list[str]]:
    """Predicted token lists for ``sources`` (token lists) from an export folder, decoded
    on ``device`` (default: the CPU)."""
    if backend not in BACKENDS:
        raise UserError(f"--backend {backend}: unknown (valid: {', '.join(BACKENDS)})")
    folder = Path(folder)
    manifest = load_manifest(folder)
    if manifest.get("kind") != "seq2seq":
        raise UserError(f"{folder}: a '{manifest.get('kind')}' export, not a predictor "
                        "(export a seq2seq checkpoint)")
    if batch_size < 1:
        raise UserError("--batch-size must be >= 1")
    check_predictor_backends(folder, manifest)
    vocab = Vocab.load(folder / "vocab.json")
    decode = batch_decoder(folder, manifest, backend, beam_width, threads, device)
    max_len = manifest["decoding"]["max_len"]
    ids = [vocab.encode(s) for s in sources]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out: list[list[str]] = [[] for _ in ids]
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        rows = decode(collate([ids[i] for i in chunk], max_len))
        for i, row in zip(chunk, rows):
            out[i] = [vocab.tokens[t] for t in cut_prediction(row)]
    return out
