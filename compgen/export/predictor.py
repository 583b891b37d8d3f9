"""The export kind of a conditional predictor checkpoint (kind "seq2seq";
``models/seq2seq.py``; ``PredictorExport``). The steps every kind shares are in ``spec.py``.

The folder has the generator export's layout (see ``compgen/export/__init__.py``):
``model.ts`` (encoder, decoder step, per-step log-probs; ``predictor_torchscript.py``),
``encoder.onnx`` + ``decoder_step.onnx`` (``predictor_graphs.py``), ``predictor.pt`` (the
weights, for ``--backend torch``), ``vocab.json`` / ``vocab.txt`` and ``manifest.json``
with the decoding contract, checksums and parity figures. There is no prototype list:
a predictor's input is the source sequence.

Validation, before the folder is moved into place: on up to ``parity_sets`` sources of
the checkpoint's data set (test split), decoded as one batch by every backend, greedy and
beam predictions must equal the eager ``greedy_search`` / ``beam_search`` ones and the
teacher-forced per-step log-probs must agree within the tolerance (absolute) on the steps
the predictions are made of (``steps_read``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from compgen.data import load_dataset
from compgen.data.files import Fields
from compgen.data.vocab import BOS_ID, COPY_ID, EOS_ID, PAD_ID, UNK_ID, Vocab
from compgen.decoding.teacher_forcing import teacher_forced_logp
from compgen.errors import UserError
from compgen.export.predictor_torchscript import export_predictor_torchscript
from compgen.export.spec import ExportOptions, KindSpec, ParityOutputs, ParityRun
from compgen.models.seq2seq import (
    MASKED,
    Seq2Seq,
    beam_search,
    collate,
    cut_prediction,
    greedy_search,
    predictor_rules,
    run_beam,
    run_greedy,
)
from compgen.runtimes.artifact import LOGP_FLOOR, write_vocab
from compgen.runtimes.manifest import Manifest
from compgen.runtimes.onnx_export import OPSET, export_predictor_onnx
from compgen.runtimes.onnx_predictor import OnnxPredictor
from compgen.runtimes.predictor_graphs import STATE_NAMES
from compgen.runtimes.recorded_outputs import finite_weights
from compgen.runtimes.torchscript_predictor import TorchScriptPredictor
from compgen.training.predictor import (
    conditional_pairs,
    load_predictor,
    read_predictor,
    save_predictor,
)

PARITY_BEAM_WIDTH = 4


def validation_sources(data: str, vocab: Vocab, data_dir, n: int,
                       fields: Fields) -> tuple[str, list[list[int]]]:
    """Up to ``n`` distinct source sequences (as ids) of the data set's test split (the
    first ``test*`` split; the training split when there is none), in file order; a file
    read with ``fields``."""
    table = load_dataset(data, data_dir, fields)
    splits = sorted(table["split"].unique().to_list())
    split = next((s for s in splits if s.startswith("test")), "train")
    seen, sources = set(), []
    for x, _ in conditional_pairs(table.filter(table["split"] == split)):
        if tuple(x) not in seen and len(sources) < n:
            seen.add(tuple(x))
            sources.append(vocab.encode(x))
    if not sources:
        raise UserError(f"{data}: no '{split}' sources to check the export on")
    return split, sources


def predictions(ids) -> list[list[int]]:
    """What ``compgen evaluate`` reads of a search's output rows (``cut_prediction``): the
    tokens a row emits after its ``</s>`` never count, so they are not compared."""
    return [cut_prediction(row) for row in np.asarray(ids).tolist()]


def steps_read(greedy_ids: torch.Tensor) -> np.ndarray:
    """``(B, L)`` True for the steps a prediction is made of: up to and including the row's
    first ``</s>`` (all steps for a row without one). Later steps feed the model its own
    post-``</s>`` output; nothing reads them, and over tens of such steps float32 rounding
    differences between backends grow past the tolerance, so they are not compared."""
    ended = (greedy_ids == EOS_ID).numpy().astype(int)
    return (np.cumsum(ended, axis=1) - ended) == 0  # no </s> before this step


def eager_step_logp(model: Seq2Seq, source: torch.Tensor, target: torch.Tensor) -> np.ndarray:
    """Per-step log-probabilities ``(B, L-1, V)`` of the eager predictor teacher-forced on
    ``target`` (starts with ``<s>``)."""
    memory, state = model.encode(source)
    return teacher_forced_logp(lambda token, state: model.decode_step(token, state, memory)[:2],
                               target, state)


def check_predictor_parity(model: Seq2Seq, folder: Path, manifest: Manifest,
                           source: torch.Tensor,
                           tolerance: float) -> ParityRun:
    """Greedy and beam predictions and per-step log-probs of TorchScript and ONNX Runtime
    against the eager model's, all on the same batch ``source``."""
    max_len, width = model.cfg.max_len, PARITY_BEAM_WIDTH
    with torch.no_grad():
        greedy_ids = greedy_search(model, source, max_len)
        eager = {"greedy": predictions(greedy_ids),
                 "beam": predictions(beam_search(model, source, width, max_len)[0])}
        # teacher-force the eager greedy rows through every backend; compare the steps
        # the predictions are made of
        target = torch.cat([torch.full((source.size(0), 1), BOS_ID), greedy_ids], 1)
        read = steps_read(greedy_ids)
        reference = eager_step_logp(model, source, target)

    def torchscript() -> ParityOutputs:
        module = torch.jit.load(str(folder / "model.ts"))
        scripted, rules = TorchScriptPredictor(module), predictor_rules(model.vocab_size)
        with torch.no_grad():
            return ParityOutputs(
                {"greedy": predictions(run_greedy(scripted, rules, source, max_len)[0]),
                 "beam": predictions(run_beam(scripted, rules, source, width, max_len)[0])},
                module.score(source, target).numpy())

    def onnx() -> ParityOutputs:
        graphs, src = OnnxPredictor(folder, manifest), source.numpy()
        return ParityOutputs({"greedy": predictions(graphs.greedy(src, max_len)[0]),
                              "beam": predictions(graphs.beam(src, max_len, width)[0])},
                             graphs.score(src, target.numpy()))

    figures = {"sources": source.size(0), "beam_width": width, "tolerance": tolerance,
               "logp_floor": LOGP_FLOOR, "logp_steps": int(read.sum()),
               "logp_compared": "teacher-forced eager greedy rows, up to each row's </s>"}
    return ParityRun(figures, ParityOutputs(eager, reference), read,
                     {"torchscript": torchscript, "onnx": onnx})


def decoding_contract(model: Seq2Seq) -> dict:
    """How a runtime must drive the two graphs to reproduce ``greedy_search`` and
    ``beam_search`` (``OnnxPredictor`` is the reference implementation)."""
    rules = predictor_rules(model.vocab_size)
    return {
        "bos": BOS_ID, "eos": EOS_ID, "pad": PAD_ID, "unk": UNK_ID, "copy": COPY_ID,
        "max_len": model.cfg.max_len,
        "source_format": ("<s> ids </s>, right-padded with <pad>; a source longer than "
                          "max_len keeps its first max_len ids and has no </s>"),
        "initial_state": {"h": "h0", "c": "c0", "feed": "zeros (batch, hidden)"},
        "state_order": list(STATE_NAMES),
        "mask_value": MASKED,
        "first_step_masked": sorted(rules.first_step_masked),
        "later_steps_masked": sorted(rules.later_steps_masked),
        "masking": "add the step's mask to log p before argmax / top-k (step 0: first, "
                   "later steps: later)",
        "greedy": "argmax for max_len steps; stop once every row has emitted </s>",
        "beam": ("one live hypothesis before step 0; a finished hypothesis proposes only "
                 "</s> at +0; top-k over width x vocab; no length normalisation"),
        "prediction": ("cut at the first </s> or <pad>; a row with neither (max_len steps) "
                       "loses its last token"),
        "test_time_dropout": False,
    }


class PredictorExport(KindSpec):
    """A conditional predictor checkpoint; validated on up to ``parity_sets`` sources of
    its data set."""

    kind = "seq2seq"
    name = "predictor"

    def __init__(self, checkpoint: Path, options: ExportOptions):
        self.checkpoint, self.log = checkpoint, options.log
        self.config = read_predictor(checkpoint).config
        self.model, self.vocab, self.info = load_predictor(checkpoint)  # eval mode: dropout off
        finite_weights(self.model, checkpoint)
        if "data" not in self.info:
            raise UserError(f"{checkpoint}: the checkpoint names no data set to validate on")
        # the data read as it was for training (its x and y fields, its columns)
        self.split, self.sources = validation_sources(
            self.info["data"], self.vocab, options.data_dir, options.parity_sets,
            Fields.of_source(self.info.get("data_source")))

    def write(self, folder: Path) -> Manifest:
        model, vocab, config, cfg = self.model, self.vocab, self.config, self.model.cfg
        export_predictor_torchscript(model, folder / "model.ts")
        export_predictor_onnx(model, folder)
        write_vocab(folder, vocab)
        # the weights without optimizer state, so `--backend torch` runs on the folder too
        save_predictor(folder / "predictor.pt", model, vocab, config.get("run", {}),
                       config.get("train", {}), train_state={"curve": self.info["curve"]})
        return Manifest(
            kind=self.kind,
            source_checkpoint=self.checkpoint.name,
            config=config,
            model={"hidden": cfg.hidden, "embed": cfg.embed, "copy": cfg.copy,
                   "max_len": cfg.max_len, "vocab_size": len(vocab)},
            opset=OPSET,
            graphs=self.graph_ios(folder),
            decoding=decoding_contract(model),
        )

    def parity(self, folder: Path, manifest: Manifest) -> ParityRun:
        self.log(f"checking the export on {len(self.sources)} '{self.split}' sources of "
                 f"{self.info['data']}")
        # one batch for every backend: the check compares backends, not batchings
        source = collate(self.sources, self.model.cfg.max_len)
        run = check_predictor_parity(self.model, folder, manifest, source, self.tolerance)
        run.figures.update(backends={}, split=self.split)   # the split after the backends
        return run
