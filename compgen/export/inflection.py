"""The export kind of an inflection checkpoint (kind "inflection"; ``models/inflection.py``;
``InflectionExport``), to ONNX. The steps every kind shares are in ``spec.py``.

The folder: ``encoder.onnx`` and ``decoder_step.onnx`` (``inflection_graphs.py``),
``vocab.json`` (source), ``target_vocab.json``, ``inflection.pt`` (the weights, for the
eager backend) and ``manifest.json`` with the decoding contract, checksums and parity
figures. The beam search runs outside the graphs
(:class:`compgen.decoding.fairseq_beam.FairseqBeamSearch`, the same code the eager model
uses).

Validation, before the folder is moved into place: on up to ``parity_sets`` sources of
the language's lemma-split test set, beam-5 predictions of ONNX Runtime must equal the
eager ones, and teacher-forced per-step log-probs (of the eager predictions, EOS
included) must agree within the tolerance.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from compgen.data.lemma_split import lemma_split_test
from compgen.decoding.teacher_forcing import teacher_forced_logp
from compgen.errors import UserError
from compgen.export.spec import ExportOptions, KindSpec, ParityOutputs, ParityRun
from compgen.models.inflection import (
    BOS_ID,
    EOS_ID,
    IncrementalDecoder,
    InflectionStepper,
    InflectionTransformer,
    fairseq_search,
    pad_batch,
)
from compgen.runtimes.inflection_graphs import EncoderGraph
from compgen.runtimes.manifest import Manifest
from compgen.runtimes.onnx_export import OPSET, export_inflection_onnx
from compgen.runtimes.onnx_inflection import OnnxInflectionDecoder, onnx_beam_search
from compgen.runtimes.recorded_outputs import finite_weights
from compgen.training.inflection import load_inflection

PARITY_BEAM = 5


def _step_logp(stepper, target: Tensor) -> np.ndarray:
    """Teacher-forced log p of every step of ``target`` (<s> y </s>) [B, T-1, V]; the
    eager stepper gives scores, the ONNX decoder log-probabilities."""
    def step(token: Tensor, state):
        out = torch.from_numpy(stepper.step(token.numpy()))
        return (torch.log_softmax(out.float(), -1) if isinstance(stepper, InflectionStepper)
                else out), state

    return teacher_forced_logp(step, target)


def check_encoder_graph(net: InflectionTransformer, source: Tensor) -> None:
    """The encoder written out for export computes what the model's encoder computes."""
    with torch.no_grad():
        enc_memory, enc_pad = net.encode(source)
        ref_k = torch.stack([k for k, _ in IncrementalDecoder(net, enc_memory, enc_pad).memory_kv])
        if not torch.allclose(ref_k, EncoderGraph(net)(source)[0], atol=1e-4):
            raise AssertionError("the export's encoder differs from the model's")


def check_inflection_parity(net: InflectionTransformer, folder: Path, sources: list,
                            tolerance: float) -> ParityRun:
    """Beam predictions, their scores and teacher-forced per-step log-probs (of the eager
    predictions, EOS included) of ONNX Runtime against the eager model's."""
    source = pad_batch(sources)
    max_len = max(len(s) for s in sources) * 2 + 10
    eager = InflectionStepper(net)
    eager.start(source, PARITY_BEAM)   # with autograd on, as the model's own beam search runs
    eager_ids, eager_scores = fairseq_search(PARITY_BEAM).best(eager, len(sources), max_len)
    target = pad_batch(eager_ids, bos=True, eos=True)
    with torch.no_grad():
        eager.start(source)
        eager_logp = _step_logp(eager, target)

    def onnx() -> ParityOutputs:
        ids, scores = onnx_beam_search(folder, source, PARITY_BEAM, max_len)
        score_diff = float(np.max(np.abs(np.array(scores) - np.array(eager_scores))))
        return ParityOutputs({"beam": ids},
                             _step_logp(OnnxInflectionDecoder(folder, source.numpy(), 1), target),
                             {"max_abs_score_diff": score_diff})

    figures = {"sources": len(sources), "split": "lemma-split", "beam_width": PARITY_BEAM,
               "tolerance": tolerance}
    return ParityRun(figures, ParityOutputs({"beam": eager_ids}, eager_logp),
                     np.asarray(target[:, 1:] != 0), {"onnx": onnx})


class InflectionExport(KindSpec):
    """An inflection checkpoint; ONNX Runtime validated on up to ``parity_sets`` sources
    of its language's lemma-split test set."""

    kind = "inflection"
    name = "inflection model"

    def __init__(self, checkpoint: Path, options: ExportOptions):
        self.checkpoint, self.log = checkpoint, options.log
        self.model = load_inflection(checkpoint)
        finite_weights(self.model.net, checkpoint)   # the network inside the trained model
        self.lang = self.model.config.get("lang")
        if not self.lang:
            raise UserError(f"{checkpoint}: the checkpoint names no language to validate on")
        rows = lemma_split_test(self.lang, options.data_dir)
        self.sources = sorted({tuple(s) for s in self.model.encode_sources(rows)})[
            :options.parity_sets]
        self.net = self.model.net.eval()
        check_encoder_graph(self.net, pad_batch(self.sources))

    def write(self, folder: Path) -> Manifest:
        model = self.model
        export_inflection_onnx(self.net, folder, len(model.src_vocab))
        shutil.copyfile(self.checkpoint, folder / "inflection.pt")
        for name, vocab in (("vocab.json", model.src_vocab), ("target_vocab.json", model.tgt_vocab)):
            (folder / name).write_text(json.dumps(vocab.tokens, ensure_ascii=False))
        return Manifest(
            kind=self.kind, source_checkpoint=self.checkpoint.name,
            config=model.config, lang=self.lang,
            model={**model.config["model"], "vocab_size": len(model.src_vocab),
                   "target_vocab_size": len(model.tgt_vocab)},
            opset=OPSET,
            graphs=self.graph_ios(folder),
            decoding={"bos": BOS_ID, "eos": EOS_ID, "pad": 0, "unk": 3,
                      "source_format": "lemma characters then tag tokens, right-padded with <pad>",
                      "beam": ("fairseq: EOS among the top `beam` of 2*beam candidates finishes; "
                               "score = sum log p (EOS included) / length; done at `beam` finished"),
                      "max_len": "2 * longest source in the batch + 10"},
        )

    def parity(self, folder: Path, manifest: Manifest) -> ParityRun:
        self.log(f"checking the export on {len(self.sources)} lemma-split sources of {self.lang}")
        return check_inflection_parity(self.net, folder, self.sources, self.tolerance)
