"""``compgen export CHECKPOINT``: a self-contained, validated artifact of a checkpoint.

``export_checkpoint`` reads the checkpoint's kind: a conditional predictor ("seq2seq") is
exported by ``compgen.export.predictor`` (same folder layout, ``predictor.pt`` instead of
``generator.pt``, no prototypes); a generator ("recombine") as described below. Pieces
shared by both (checksums, vocabulary files, staging, tolerance) are in ``artifact.py``.

A generator's folder holds
* ``model.ts``: TorchScript module with the whole sampler (encoder, decoding loop with
  copying, greedy / temperature / mixed / beam, per-token log-probs);
* ``encoder.onnx`` and ``decoder_step.onnx``: the same two graphs for ONNX Runtime,
  dynamic batch and length axes, checked by ``onnx.checker``;
* no separate eager weights: ``--backend torch`` rebuilds the eager model from the
  manifest's config and the weights inside ``model.ts`` (one fp32 copy fewer);
* ``vocab.json`` (and ``vocab.txt``, one token per line, for the C++ runner);
* ``prototypes.txt``: the sampling-time prototype tuples (Omega) of the training data,
  shuffled once, as token ids already formatted for the model (one tuple per line, K
  tab-separated fields); every runtime cycles through it;
* ``manifest.json``: model kind and config, vocabulary size, opset, graph inputs and
  outputs with dynamic axes, the decoding contract, sha256 of every file, and the
  parity figures measured before the artifact was written.

Export validates first, in a temporary folder: greedy outputs of every exported backend
must equal the eager model's on ``parity_sets`` prototype sets, and the per-step
log-probabilities must agree within ``tolerance``. A failed check raises an error and
no artifact is written. Exported graphs are deterministic: test-time dropout
(``outdrop_test``) is off; sampling randomness lives in the runtimes.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from compgen.data.vocab import BOS_ID, EOS_ID, PAD_ID, SEP_ID, Vocab
from compgen.errors import UserError, read_text
from compgen.export.artifact import (  # noqa: F401 (re-exported: the package's API)
    FORMAT,
    LOGP_FLOOR,
    TOLERANCE,
    default_output,
    load_manifest,
    logp_diff,
    logp_rel_diff,
    seal,
    sha256,
    staged_folder,
    write_vocab,
)
from compgen.export.graphs import STATE_NAMES, deterministic, state_shapes
from compgen.export.onnx_export import OPSET, export_onnx
from compgen.export.ties import compare_outputs
from compgen.export.torchscript import export_torchscript
from compgen.models.recombine import format_prototype
from compgen.sampling import FIRST_STEP_BANNED, LATER_BANNED, beam_search, sample_batch

MAX_PROTOTYPES = 100_000  # cap on the stored prototype list (Omega can have millions)


def write_prototypes(path: Path, tuples, vocab: Vocab, variant: str, max_len: int) -> int:
    with open(path, "w", encoding="utf-8") as f:
        for tup in tuples:
            fields = [" ".join(map(str, format_prototype(vocab.encode(p), variant, max_len)))
                      for p in tup]
            f.write("\t".join(fields) + "\n")
    return len(tuples)


def read_prototypes(path: Path, nproto: int) -> list[list[list[int]]]:
    """Prototype tuples of an export folder (formatted ids)."""
    if nproto == 0:
        return []
    tuples = []
    for lineno, line in enumerate(read_text(path).splitlines(), 1):
        fields = line.split("\t")
        if len(fields) != nproto:
            raise UserError(f"{path}:{lineno}: expected {nproto} prototypes per line")
        tuples.append([[int(t) for t in f.split()] for f in fields])
    if not tuples:
        raise UserError(f"{path}: no prototypes")
    return tuples


def pad_tuples(tuples: list, nproto: int, batch: int) -> torch.Tensor:
    """Formatted prototype id tuples -> ``(B, K, T)`` (``(B, 0, 1)`` without prototypes)."""
    if nproto == 0:
        return torch.zeros((batch, 0, 1), dtype=torch.long)
    length = max(len(p) for tup in tuples for p in tup)
    out = torch.full((len(tuples), nproto, length), PAD_ID, dtype=torch.long)
    for b, tup in enumerate(tuples):
        for k, p in enumerate(tup):
            out[b, k, : len(p)] = torch.tensor(p)
    return out


def _trim(tokens: np.ndarray) -> list[tuple[int, ...]]:
    """Rows of ids -> tuples up to and including </s> (pads dropped)."""
    rows = []
    for row in tokens.tolist():
        out = []
        for t in row:
            if t == PAD_ID:
                break
            out.append(t)
            if t == EOS_ID:
                break
        rows.append(tuple(out))
    return rows


def _eager_step_logp(model, protos: torch.Tensor, z: torch.Tensor, target: torch.Tensor):
    memory, state = model.encode(protos, z, target.size(1))
    steps = []
    for t in range(target.size(1) - 1):
        logp, state = model.decode_step(target[:, t], state, memory)
        steps.append(logp)
    return torch.stack(steps, 1)


def check_parity(model, folder: Path, manifest: dict, protos: torch.Tensor, max_len: int,
                 cpp_binary: Path | None = None) -> dict:
    """Greedy outputs and per-step log-probs of every backend against the eager model."""
    from compgen.export.onnx_decoder import OnnxGenerator

    B = protos.size(0)
    z = torch.zeros(B, model.latent)
    with torch.no_grad():
        eager = _trim(sample_batch(model, protos, "greedy", 1.0, max_len, z).tokens.numpy())
        eager_beam = _trim(beam_search(model, protos, 4, max_len, z)[0][:, 0].numpy())
    # teacher-force the eager greedy outputs (padded) through every backend
    width = max(len(r) for r in eager) + 1
    target = torch.full((B, width), PAD_ID, dtype=torch.long)
    target[:, 0] = BOS_ID
    for b, r in enumerate(eager):
        target[b, 1: len(r) + 1] = torch.tensor(r, dtype=torch.long)
    with torch.no_grad():
        ref = _eager_step_logp(model, protos, z, target).numpy()

    figures = {"sets": B, "tolerance": TOLERANCE, "logp_floor": LOGP_FLOOR, "backends": {}}
    scripted = torch.jit.load(str(folder / "model.ts"))
    with torch.no_grad():
        ts_greedy = _trim(scripted.decode(protos, z, max_len, 1.0, 0)[0].numpy())
        ts_beam = _trim(scripted.beam(protos, z, max_len, 4)[0].numpy())
        ts_logp = scripted.score(protos, z, target).numpy()
    vocab = Vocab.load(folder / "vocab.json")

    def outputs_agree(greedy, beam) -> dict:
        """Greedy and beam outputs against the eager model's; near-ties are not failures."""
        found = {mode: compare_outputs(model, protos, z, mine, theirs, TOLERANCE, mode, vocab)
                 for mode, mine, theirs in (("greedy", eager, greedy), ("beam", eager_beam, beam))}
        figures = {}
        for mode, f in found.items():
            figures[f"{mode}_identical"] = not f["disagreements"]
            figures[f"{mode}_near_ties"] = f["near_ties"]
            if f["disagreements"]:
                figures[f"{mode}_disagreements"] = f["disagreements"][:3]
                figures[f"{mode}_disagreement_count"] = len(f["disagreements"])
        return figures

    figures["backends"]["torchscript"] = {
        **outputs_agree(ts_greedy, ts_beam), "max_abs_logp_diff": logp_diff(ts_logp, ref),
        "max_rel_logp_diff": logp_rel_diff(ts_logp, ref)}

    onnx = OnnxGenerator(folder, manifest)
    rng = np.random.default_rng(0)
    ort_greedy = _trim(onnx.decode(protos.numpy(), z.numpy(), max_len, 1.0, 0, rng)[0])
    ort_beam = _trim(onnx.beam(protos.numpy(), z.numpy(), max_len, 4)[0])
    ort_logp = onnx.score(protos.numpy(), z.numpy(), target.numpy())
    figures["backends"]["onnx"] = {
        **outputs_agree(ort_greedy, ort_beam), "max_abs_logp_diff": logp_diff(ort_logp, ref),
        "max_rel_logp_diff": logp_rel_diff(ort_logp, ref)}

    if cpp_binary is not None:
        from compgen.export.cpp_runner import run_cpp

        out = folder / ".parity-cpp.tsv"
        run_cpp(cpp_binary, folder, out, n=B, batch_size=B, strategy="greedy", seed=0,
                max_len=max_len, offset=0)
        from compgen.export.cpp_runner import read_cpp_samples

        cpp_rows = read_cpp_samples(out)
        out.unlink()
        eager_text = [_as_pair(vocab, r) for r in eager]
        figures["backends"]["cpp"] = {"greedy_identical": [(x, y) for x, y, _, _ in cpp_rows] == eager_text}
    return figures


def _as_pair(vocab: Vocab, ids) -> tuple[list[str], list[str]]:
    toks = vocab.decode(ids, strip=True)
    if SEP_ID < len(vocab) and vocab.tokens[SEP_ID] in toks:
        i = toks.index(vocab.tokens[SEP_ID])
        return toks[:i], toks[i + 1:]
    return toks, []


def export_checkpoint(checkpoint, out=None, *, parity_sets: int = 256, seed: int = 0,
                      data_dir=None, cpp_binary: Path | None = None, log=print,
                      max_prototypes: int = MAX_PROTOTYPES) -> dict:
    """Export a generator or predictor checkpoint to ``out`` (default
    ``exported/<name>``); returns the manifest. ``parity_sets`` is the number of
    prototype sets (generator) or test sources (predictor) the validation decodes."""
    from compgen.checkpoint import load_checkpoint

    kind = load_checkpoint(checkpoint).kind
    if kind == "seq2seq":
        from compgen.export.predictor import export_predictor

        # the C++ runner only runs generators: nothing to check it against here
        return export_predictor(checkpoint, out, parity_sources=parity_sets,
                                data_dir=data_dir, log=log)
    if kind == "inflection":
        from compgen.export.inflection import export_inflection

        return export_inflection(checkpoint, out, parity_sources=parity_sets, data_dir=data_dir,
                                 log=log)
    if kind != "recombine":
        raise UserError(f"{checkpoint}: a '{kind}' checkpoint; export takes generator "
                        "('recombine') and predictor ('seq2seq') checkpoints")
    return export_generator(checkpoint, out, parity_sets=parity_sets, seed=seed,
                            data_dir=data_dir, cpp_binary=cpp_binary, log=log,
                            max_prototypes=max_prototypes)


def export_generator(checkpoint, out=None, *, parity_sets: int = 256, seed: int = 0,
                     data_dir=None, cpp_binary: Path | None = None, log=print,
                     max_prototypes: int = MAX_PROTOTYPES) -> dict:
    """Export a generator checkpoint to ``out`` (default ``exported/<name>``); returns the
    manifest. Validates every backend before the folder is moved into place.
    ``max_prototypes`` caps ``prototypes.txt`` (the runtimes cycle through it)."""
    from compgen.checkpoint import load_generator
    from compgen.data import load_dataset
    from compgen.sampling import prototype_source

    if max_prototypes < 1:
        raise UserError(f"--prototypes {max_prototypes}: must be >= 1")
    checkpoint = Path(checkpoint)
    out = Path(out) if out else default_output(checkpoint)
    model, vocab, config = load_generator(checkpoint)
    model = deterministic(model)
    cfg = model.cfg
    variant, max_len = cfg.variant, cfg.max_len
    start = time.perf_counter()

    table = load_dataset(config["data"], data_dir)
    draw = prototype_source(config, table, model.nproto, seed)
    n_proto = min(max_prototypes, MAX_PROTOTYPES) if model.nproto else 0
    tuples = draw(min(n_proto, _omega_size(draw))) if model.nproto else []

    with staged_folder(out) as tmp:
        torch.manual_seed(seed)
        export_torchscript(model, tmp / "model.ts", max_len)
        graphs = export_onnx(model, tmp, max_len)
        write_vocab(tmp, vocab)
        n_written = write_prototypes(tmp / "prototypes.txt", tuples, vocab, variant, max_len)
        manifest = {
            "format": FORMAT,
            "kind": "recombine",
            "source_checkpoint": checkpoint.name,
            "config": config,
            "model": {"variant": variant, "nproto": model.nproto, "copy": cfg.copy,
                      "vae": cfg.vae, "hidden": model.hidden, "feed_dim": model.feed_dim,
                      "latent": model.latent, "max_norm": cfg.max_norm,
                      "vocab_size": len(vocab)},
            "opset": OPSET,
            "graphs": graphs,
            "decoding": {
                "bos": BOS_ID, "eos": EOS_ID, "pad": PAD_ID, "sep": SEP_ID,
                "max_len": max_len,
                "first_step_banned": list(FIRST_STEP_BANNED),
                "later_steps_banned": list(LATER_BANNED),
                "strategies": {"greedy": 0, "temperature": 1, "mixed": 2, "beam": "beam()"},
                "prototype_format": "ids + </s>" if variant == "scan" else "<s> + ids",
                "state": {n: list(s) for n, s in state_shapes(model, 1, max_len).items()},
                "state_order": list(STATE_NAMES),
                "latent_prior": ("direction ~ uniform on the sphere, norm ~ U(0, max_norm)"
                                 if cfg.vae else "zeros"),
                "test_time_dropout": False,
                "prototypes": n_written,
            },
        }
        k = min(parity_sets, n_written) if model.nproto else parity_sets
        protos = pad_tuples(read_prototypes(tmp / "prototypes.txt", model.nproto)[:k],
                            model.nproto, k)
        figures = check_parity(model, tmp, manifest, protos, max_len, cpp_binary)
        seal(tmp, manifest, figures, checkpoint, start)
    return manifest


def _omega_size(draw) -> int:
    owner = getattr(draw, "__self__", None)
    try:
        return len(owner) if owner is not None else MAX_PROTOTYPES
    except TypeError:
        return MAX_PROTOTYPES
