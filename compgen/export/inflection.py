"""Export of an inflection checkpoint (kind "inflection"; ``models/inflection.py``) to ONNX.

The folder: ``encoder.onnx`` (source ids -> the cross-attention keys/values of every
decoder layer + the source padding mask) and ``decoder_step.onnx`` (one incremental
step: last token, its position, the self-attention cache and the encoder's keys/values
-> log p(next token) and the grown cache), ``vocab.json`` (source), ``target_vocab.json``,
``inflection.pt`` (the weights, for the eager backend) and ``manifest.json`` with the
decoding contract, checksums and parity figures. The beam search runs outside the graphs
(:class:`compgen.decoding.fairseq_beam.FairseqBeamSearch`, the same code the eager model
uses).

Validation, before the folder is moved into place: on up to ``parity_sources`` sources of
the language's lemma-split test set, beam-5 predictions of ONNX Runtime must equal the
eager ones, and teacher-forced per-step log-probs (of the eager predictions, EOS
included) must agree within ``TOLERANCE``.
"""

from __future__ import annotations

import json
import shutil
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from compgen.errors import UserError, read_text
from compgen.export.artifact import (
    FORMAT,
    TOLERANCE,
    default_output,
    logp_diff,
    seal,
    staged_folder,
)
from compgen.models.inflection import (
    BOS_ID,
    EOS_ID,
    IncrementalDecoder,
    InflectionStepper,
    InflectionTransformer,
    _attend,
    _split_heads,
    fairseq_search,
    pad_batch,
)
from compgen.sampling.load_check import finite_weights

OPSET = 17
PARITY_BEAM = 5
ENCODER_OUTPUTS = ("memory_k", "memory_v", "src_pad")
STEP_INPUTS = ("token", "position", "past_k", "past_v", "memory_k", "memory_v", "src_pad")
STEP_OUTPUTS = ("logp", "past_k_out", "past_v_out")
DYNAMIC_AXES = {"source": {0: "batch", 1: "source_len"}, "token": {0: "batch"},
                "logp": {0: "batch"}, "src_pad": {0: "batch", 1: "source_len"},
                **{n: {1: "batch", 3: "source_len"} for n in ("memory_k", "memory_v")},
                **{n: {1: "batch", 3: "steps"} for n in ("past_k", "past_v", "past_k_out",
                                                         "past_v_out")}}


class EncoderGraph(nn.Module):
    def __init__(self, model: InflectionTransformer):
        super().__init__()
        self.model = model

    def forward(self, source: Tensor):
        # the encoder written out with shape-generic ops (nn.MultiheadAttention's traced
        # graph keeps the example's source length); same function as model.encode
        m = self.model
        d, heads = m.config.embed_dim, m.config.heads
        pad = source.eq(0)
        x = m.src_embed(source) * m.scale + m.positions[: source.shape[1]]
        for layer in m.encoder.layers:
            sa = layer.self_attn
            q, k, v = (_split_heads(t, heads) for t in (x @ sa.in_proj_weight.T + sa.in_proj_bias).split(d, -1))
            x = layer.norm1(x + sa.out_proj(_attend(q, k, v, pad)))
            x = layer.norm2(x + layer.linear2(layer.activation(layer.linear1(x))))
        memory = x
        dec = IncrementalDecoder(self.model, memory, pad)
        return (torch.stack([k for k, _ in dec.memory_kv]), torch.stack([v for _, v in dec.memory_kv]),
                pad.to(torch.uint8))


class StepGraph(nn.Module):
    """[layers, batch, heads, steps, head_dim] caches; ``position`` = steps so far."""

    def __init__(self, model: InflectionTransformer):
        super().__init__()
        self.model = model

    def forward(self, token, position, past_k, past_v, memory_k, memory_v, src_pad):
        dec = IncrementalDecoder.__new__(IncrementalDecoder)
        dec.model, dec.heads, dec.pad = self.model, self.model.config.heads, src_pad.bool()
        dec.memory_kv = list(zip(memory_k.unbind(0), memory_v.unbind(0), strict=True))
        dec.cache = list(zip(past_k.unbind(0), past_v.unbind(0), strict=True))
        dec.length = position
        logits = dec.step(token)
        return (torch.log_softmax(logits, -1), torch.stack([k for k, _ in dec.cache]),
                torch.stack([v for _, v in dec.cache]))


class OnnxInflectionDecoder:
    """The exported graphs as a step function of the decoding core, started on ``source``
    with every row repeated ``beam`` times; ``step`` returns log-probabilities."""

    def __init__(self, folder: Path, source: np.ndarray, beam: int, device=None):
        import onnxruntime as ort

        from compgen.device import as_device, ort_session

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


def _step_logp(stepper, target: Tensor) -> np.ndarray:
    """Teacher-forced log p of every step of ``target`` (<s> y </s>) [B, T-1, V]."""
    steps = []
    for t in range(target.shape[1] - 1):
        out = torch.from_numpy(stepper.step(target[:, t].numpy()))
        steps.append(torch.log_softmax(out.float(), -1) if isinstance(stepper, InflectionStepper) else out)
    return torch.stack(steps, 1).numpy()


def _export_graph(module, args, path, inputs, outputs) -> None:
    import onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, str(path), dynamo=False, opset_version=OPSET,
                          input_names=list(inputs), output_names=list(outputs),
                          dynamic_axes={k: v for k, v in DYNAMIC_AXES.items() if k in inputs + outputs})
    onnx.checker.check_model(str(path), full_check=True)


def export_inflection(checkpoint, out=None, *, parity_sources: int = 256, lang: str | None = None,
                      data_dir=None, log=print) -> dict:
    """Export an inflection checkpoint; validate ONNX Runtime against the eager model."""
    from compgen.data.lemma_split import lemma_split_test
    from compgen.export.onnx_export import graph_io
    from compgen.training.inflection import load_inflection

    checkpoint = Path(checkpoint)
    out = Path(out) if out else default_output(checkpoint)
    start = time.perf_counter()
    model = load_inflection(checkpoint)
    finite_weights(model.net, checkpoint)   # the network inside the trained model
    lang = lang or model.config.get("lang")
    if not lang:
        raise UserError(f"{checkpoint}: the checkpoint names no language to validate on")
    rows = lemma_split_test(lang, data_dir)
    sources = sorted({tuple(s) for s in model.encode_sources(rows)})[:parity_sources]
    source = pad_batch(sources)
    net = model.net.eval()
    example = torch.tensor([[5, 6, 7], [6, 5, 0]]).clamp(max=len(model.src_vocab) - 1)
    with torch.no_grad():
        enc_memory, enc_pad = net.encode(source)
        ref_k = torch.stack([k for k, _ in IncrementalDecoder(net, enc_memory, enc_pad).memory_kv])
        graph_k = EncoderGraph(net)(source)[0]
        if not torch.allclose(ref_k, graph_k, atol=1e-4):
            raise AssertionError("the export's encoder differs from the model's")
        mk, mv, pad = EncoderGraph(net)(example)
        layers, _, heads, _, dim = mk.shape
        empty = torch.zeros(layers, 2, heads, 0, dim)
        step_args = (torch.tensor([BOS_ID, BOS_ID]), torch.tensor(0), empty, empty, mk, mv, pad)
    with staged_folder(out) as tmp:
        _export_graph(EncoderGraph(net), (example,), tmp / "encoder.onnx", ("source",), ENCODER_OUTPUTS)
        _export_graph(StepGraph(net), step_args, tmp / "decoder_step.onnx", STEP_INPUTS, STEP_OUTPUTS)
        shutil.copyfile(checkpoint, tmp / "inflection.pt")
        (tmp / "vocab.json").write_text(json.dumps(model.src_vocab.tokens, ensure_ascii=False))
        (tmp / "target_vocab.json").write_text(json.dumps(model.tgt_vocab.tokens, ensure_ascii=False))
        manifest = {
            "format": FORMAT, "kind": "inflection", "source_checkpoint": checkpoint.name,
            "config": model.config, "lang": lang,
            "model": {**model.config["model"], "vocab_size": len(model.src_vocab),
                      "target_vocab_size": len(model.tgt_vocab)},
            "opset": OPSET,
            "graphs": {name: graph_io(tmp / name) for name in ("encoder.onnx", "decoder_step.onnx")},
            "decoding": {"bos": BOS_ID, "eos": EOS_ID, "pad": 0, "unk": 3,
                         "source_format": "lemma characters then tag tokens, right-padded with <pad>",
                         "beam": ("fairseq: EOS among the top `beam` of 2*beam candidates finishes; "
                                  "score = sum log p (EOS included) / length; done at `beam` finished"),
                         "max_len": "2 * longest source in the batch + 10"},
        }
        log(f"checking the export on {len(sources)} lemma-split sources of {lang}")
        max_len = max(len(s) for s in sources) * 2 + 10
        eager = InflectionStepper(net)
        eager.start(source, PARITY_BEAM)
        eager_ids, eager_scores = fairseq_search(PARITY_BEAM).best(eager, len(sources), max_len)
        onnx_ids, onnx_scores = onnx_beam_search(tmp, source, PARITY_BEAM, max_len)
        target = pad_batch(eager_ids, bos=True, eos=True)
        keep = np.asarray(target[:, 1:] != 0)
        with torch.no_grad():
            eager.start(source)
            eager_logp = _step_logp(eager, target)
        onnx_logp = _step_logp(OnnxInflectionDecoder(tmp, source.numpy(), 1), target)
        figures = {"sources": len(sources), "split": "lemma-split", "beam_width": PARITY_BEAM,
                   "tolerance": TOLERANCE, "backends": {"onnx": {
                       "beam_identical": onnx_ids == eager_ids,
                       "max_abs_logp_diff": logp_diff(onnx_logp[keep], eager_logp[keep]),
                       "max_abs_score_diff": float(np.max(np.abs(np.array(onnx_scores) - np.array(eager_scores))))}}}
        seal(tmp, manifest, figures, checkpoint, start)
    return manifest


def load_exported_inflection(folder: Path):
    """The manifest (checksums verified) and the model's vocabularies of an export folder."""
    from compgen.export.artifact import read_manifest, verify_files
    from compgen.models.inflection import CharVocab

    folder = Path(folder)
    path = folder / "manifest.json"
    manifest = read_manifest(folder)
    if manifest.get("format") != FORMAT or manifest.get("kind") != "inflection":
        raise UserError(f"{path}: not an exported inflection model")
    verify_files(folder, manifest)
    try:
        src = CharVocab(json.loads(read_text(folder / "vocab.json")))
        tgt = CharVocab(json.loads(read_text(folder / "target_vocab.json")))
    except (ValueError, TypeError, KeyError, RecursionError) as exc:
        raise UserError(f"{folder}: damaged vocabulary files ({exc})") from None
    return manifest, src, tgt
