"""An exported inflection model (``compgen export`` of an inflection checkpoint) run by ONNX
Runtime: its two graphs as a stepper of the decoding core, searched by the reference's
beam (``compgen.decoding.fairseq_beam``)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
from torch import Tensor

from compgen.device import as_device, ort_session
from compgen.errors import UserError, read_text
from compgen.models.inflection import CharVocab, fairseq_search
from compgen.runtimes.artifact import verify_files
from compgen.runtimes.manifest import FORMAT, Manifest
from compgen.runtimes.manifest_file import read_manifest_json


class OnnxInflectionDecoder:
    """The exported graphs as a step function of the decoding core, started on ``source``
    with every row repeated ``beam`` times; ``step`` returns log-probabilities."""

    def __init__(self, folder: Path, source: np.ndarray, beam: int, device=None):
        device = as_device(device)   # None: the CPU (the export's parity check)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        self.encoder = ort_session(str(folder / "encoder.onnx"), opts, device)
        self.stepper = ort_session(str(folder / "decoder_step.onnx"), opts, device)
        mk, mv, pad = self.encoder.run(None, {"source": source})
        self.memory_k = np.repeat(mk, beam, axis=1)
        self.memory_v = np.repeat(mv, beam, axis=1)
        self.pad = np.repeat(pad, beam, axis=0)
        layers, batch, heads, _, dim = self.memory_k.shape
        self.past_k = np.zeros((layers, batch, heads, 0, dim), dtype=np.float32)
        self.past_v = self.past_k.copy()
        self.length = 0

    def step(self, tokens: np.ndarray) -> np.ndarray:
        logp, self.past_k, self.past_v = self.stepper.run(None, {
            "token": tokens.astype(np.int64), "position": np.array(self.length, dtype=np.int64),
            "past_k": self.past_k, "past_v": self.past_v, "memory_k": self.memory_k,
            "memory_v": self.memory_v, "src_pad": self.pad})
        self.length += 1
        return logp

    def take(self, idx: np.ndarray, memory: bool = True) -> None:
        self.past_k, self.past_v = self.past_k[:, idx], self.past_v[:, idx]
        self.memory_k, self.memory_v, self.pad = self.memory_k[:, idx], self.memory_v[:, idx], self.pad[idx]


def onnx_beam_search(folder: Path, source: Tensor, beam: int = 5, max_len: int = 100,
                     device=None):
    return fairseq_search(beam).best(OnnxInflectionDecoder(Path(folder), source.numpy(), beam, device),
                                     source.shape[0], max_len)


def load_exported_inflection(folder: Path) -> tuple[Manifest, CharVocab, CharVocab]:
    """The manifest (checksums verified) and the model's vocabularies of an export folder."""
    folder = Path(folder)
    path = folder / "manifest.json"
    document = read_manifest_json(folder)
    if document.get("format") != FORMAT or document.get("kind") != "inflection":
        raise UserError(f"{path}: not an exported inflection model")
    verify_files(folder, document)
    manifest = Manifest.from_json(document, path)
    try:
        src = CharVocab(json.loads(read_text(folder / "vocab.json")))
        tgt = CharVocab(json.loads(read_text(folder / "target_vocab.json")))
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise UserError(f"{folder}: damaged vocabulary files ({exc})") from None
    return manifest, src, tgt
