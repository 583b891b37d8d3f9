"""``compgen export CHECKPOINT``: a self-contained, validated artifact of a checkpoint.

``export_checkpoint`` reads the checkpoint's kind: a conditional predictor ("seq2seq") is
exported by ``compgen.export.predictor`` (same folder layout, ``predictor.pt`` instead of
``generator.pt``, no prototypes); a generator ("recombine") as described below. Pieces
shared by both (checksums, vocabulary files, staging, tolerance) are in ``artifact.py``.

A generator's folder holds
* ``model.ts``: TorchScript module with the sampler's graphs (prototype encoder, encoder,
  decoder step; the decode loop around them is the manifest's contract);
* ``prototypes.onnx``, ``encoder.onnx`` and ``decoder_step.onnx``: the same three graphs
  for ONNX Runtime, dynamic batch and length axes, checked by ``onnx.checker``;
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
from compgen.decoding.contract import Contract
from compgen.decoding.search import BeamSearch, GreedySearch, decode
from compgen.errors import UserError
from compgen.export.artifact import (
    FORMAT,
    LOGP_FLOOR,
    TOLERANCE,
    TRAINING_PAIRS,
    default_output,
    eager_model,
    load_manifest,
    logp_diff,
    logp_rel_diff,
    read_prototypes,
    seal,
    staged_folder,
    write_vocab,
)
from compgen.export.graphs import deterministic
from compgen.export.onnx_export import OPSET, export_onnx
from compgen.export.ties import compare_outputs
from compgen.export.torchscript import export_torchscript
from compgen.models.recombine import format_prototype
from compgen.sampling.eager import BEAM_WIDTH, beam_search, sample_batch
from compgen.sampling.load_check import as_manifest, finite_weights, greedy_rows, pad_tuples

MAX_PROTOTYPES = 100_000  # cap on the stored prototype list (Omega can have millions)


def write_training_pairs(path: Path, table) -> None:
    """The data set's training pairs (x, y, tokens space-joined) as a samples TSV."""
    import polars as pl

    from compgen.io import write_samples_tsv

    train = table.filter(pl.col("split") == "train")
    write_samples_tsv(path, zip(train["x"].to_list(), train["y"].to_list()))


def write_prototypes(path: Path, tuples, vocab: Vocab, variant: str, max_len: int) -> int:
    with open(path, "w", encoding="utf-8") as f:
        for tup in tuples:
            fields = [" ".join(map(str, format_prototype(vocab.encode(p), variant, max_len)))
                      for p in tup]
            f.write("\t".join(fields) + "\n")
    return len(tuples)


def _trim(tokens: np.ndarray) -> list[tuple[int, ...]]:
    """Rows of ids -> tuples up to and including </s> (pads dropped)."""
    rows = []
    for row in (tokens.tolist() if isinstance(tokens, np.ndarray) else tokens):
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
    """Greedy and beam outputs and per-step log-probs of every backend against the eager
    model, all through the shared decode loop with the manifest's contract."""
    from compgen.sampling.backends.onnx import OnnxGenerator
    from compgen.sampling.backends.torchscript import TorchScriptGenerator

    B = protos.size(0)
    z = torch.zeros(B, model.latent)
    contract = Contract.from_manifest(manifest["decoding"])
    width = contract.beam_width
    with torch.no_grad():
        eager = _trim(sample_batch(model, protos, "greedy", 1.0, max_len, z).tokens.numpy())
        eager_beam = _trim(beam_search(model, protos, width, max_len, z)[0][:, 0].numpy())
    # teacher-force the eager greedy outputs (padded) through every backend
    steps = max(len(r) for r in eager) + 1
    target = torch.full((B, steps), PAD_ID, dtype=torch.long)
    target[:, 0] = BOS_ID
    for b, r in enumerate(eager):
        target[b, 1: len(r) + 1] = torch.tensor(r, dtype=torch.long)
    with torch.no_grad():
        ref = _eager_step_logp(model, protos, z, target).numpy()
    # the steps a decoder takes: each row's tokens and its </s>; teacher forcing a short
    # row beside a long one feeds it padding after that, a state no decoder reaches, where
    # the recurrent state drifts and two runtimes' rounding grows step after step
    lengths = np.array([len(r) for r in eager])
    reached = np.arange(ref.shape[1])[None, :] <= lengths[:, None]

    figures = {"sets": B, "tolerance": TOLERANCE, "logp_floor": LOGP_FLOOR, "backends": {}}
    vocab = Vocab.load(folder / "vocab.json")

    def outputs_agree(greedy, beam_best) -> dict:
        """Greedy and beam outputs against the eager model's; near-ties are not failures."""
        found = {mode: compare_outputs(model, protos, z, mine, theirs, TOLERANCE, mode, vocab)
                 for mode, mine, theirs in (("greedy", eager, greedy),
                                            ("beam", eager_beam, beam_best))}
        figures = {}
        for mode, f in found.items():
            figures[f"{mode}_identical"] = not f["disagreements"]
            figures[f"{mode}_near_ties"] = f["near_ties"]
            if f["disagreements"]:
                figures[f"{mode}_disagreements"] = f["disagreements"][:3]
                figures[f"{mode}_disagreement_count"] = len(f["disagreements"])
        return figures

    p_np, z_np = protos.numpy(), z.numpy()

    def run(stepper_of) -> tuple:
        greedy = decode(stepper_of(), contract, p_np, z_np, GreedySearch(), max_len=max_len)[0]
        best = decode(stepper_of(), contract, p_np, z_np, BeamSearch(width), max_len=max_len)[0]
        return _trim(greedy), _trim(best)

    scripted = TorchScriptGenerator(folder, manifest)
    with torch.no_grad():
        ts_logp = scripted.module.score(protos, z, target).numpy()
    figures["backends"]["torchscript"] = {
        **outputs_agree(*run(scripted.stepper)),
        "max_abs_logp_diff": logp_diff(ts_logp, ref, reached),
        "max_rel_logp_diff": logp_rel_diff(ts_logp, ref, reached)}

    onnx = OnnxGenerator(folder, manifest)
    ort_logp = onnx.score(p_np, z_np, target.numpy())
    figures["backends"]["onnx"] = {
        **outputs_agree(*run(onnx.stepper)),
        "max_abs_logp_diff": logp_diff(ort_logp, ref, reached),
        "max_rel_logp_diff": logp_rel_diff(ort_logp, ref, reached)}

    if cpp_binary is not None:
        from compgen.sampling.backends.cpp import decode_with_runner

        greedy, best = (decode_with_runner(cpp_binary, folder, manifest, p_np, z_np, mode,
                                           max_len) for mode in ("greedy", "beam"))
        figures["backends"]["cpp"] = outputs_agree(_trim(greedy), _trim(best))
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
    from compgen.training.checkpoint import load_checkpoint

    if Path(checkpoint).is_dir():  # an export folder: exported again in the current format
        kind = load_manifest(checkpoint).get("kind", "recombine")
        if kind != "recombine":
            raise UserError(f"{checkpoint}: re-exporting a '{kind}' export folder is not "
                            "supported; export its checkpoint")
    else:
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
    from compgen.neighborhoods.user_data import export_prototype_options, training_table
    from compgen.sampling.eager import prototype_source
    from compgen.training.checkpoint import load_generator

    if max_prototypes < 1:
        raise UserError(f"--prototypes {max_prototypes}: must be >= 1")
    checkpoint = Path(checkpoint)
    out = Path(out) if out else default_output(checkpoint)
    earlier = None  # re-exporting an export folder: its weights and its prototype order
    if checkpoint.is_dir():
        earlier = load_manifest(checkpoint)
        model, vocab, config = eager_model(checkpoint, earlier)
        stored = (checkpoint / "prototypes.txt").read_text(encoding="utf-8")
    else:
        model, vocab, config = load_generator(checkpoint)
    finite_weights(model, checkpoint)
    model = deterministic(model)
    cfg = model.cfg
    variant, max_len = cfg.variant, cfg.max_len
    start = time.perf_counter()

    table = training_table(config, data_dir)  # user data: the pairs the checkpoint records
    tuples = []
    if earlier is None and model.nproto:
        draw = prototype_source(config, table, model.nproto, seed,
                                **export_prototype_options(config))
        tuples = draw(min(max_prototypes, MAX_PROTOTYPES, _omega_size(draw)))

    with staged_folder(out) as tmp:
        torch.manual_seed(seed)
        export_torchscript(model, tmp / "model.ts", max_len)
        graphs = export_onnx(model, tmp, max_len)
        write_vocab(tmp, vocab)
        if earlier is None:
            n_written = write_prototypes(tmp / "prototypes.txt", tuples, vocab, variant, max_len)
        else:
            (tmp / "prototypes.txt").write_text(stored, encoding="utf-8")
            n_written = earlier["decoding"]["prototypes"]
        width = max((len(p) for tup in read_prototypes(tmp / "prototypes.txt", model.nproto)
                     for p in tup), default=0)
        write_training_pairs(tmp / TRAINING_PAIRS, table)
        beam_width = int(config.get("sample", {}).get("beam_width", BEAM_WIDTH))
        manifest = {
            "format": FORMAT,
            "kind": "recombine",
            "source_checkpoint": earlier["source_checkpoint"] if earlier else checkpoint.name,
            "config": config,
            "model": {"variant": variant, "nproto": model.nproto, "copy": cfg.copy,
                      "vae": cfg.vae, "hidden": model.hidden, "feed_dim": model.feed_dim,
                      "latent": model.latent, "max_norm": cfg.max_norm,
                      "vocab_size": len(vocab)},
            "opset": OPSET,
            "graphs": graphs,
            "decoding": {
                **Contract.for_model(model, beam_width=beam_width, prototypes=n_written,
                                     prototype_width=width).to_manifest(),
                "prototype_format": "ids + </s>" if variant == "scan" else "<s> + ids",
                "latent_prior": ("direction ~ uniform on the sphere, norm ~ U(0, max_norm)"
                                 if cfg.vae else "zeros"),
                "test_time_dropout": False,
            },
            "training_pairs": TRAINING_PAIRS,
        }
        k = min(parity_sets, n_written) if model.nproto else parity_sets
        protos = pad_tuples(read_prototypes(tmp / "prototypes.txt", model.nproto)[:k],
                            model.nproto, k, width)
        figures = check_parity(model, tmp, manifest, protos, max_len, cpp_binary)
        manifest["load_check"] = as_manifest(greedy_rows(tmp, manifest))
        if earlier is not None and earlier.get("card"):   # the card's own text stays
            manifest["card"] = earlier["card"]
        seal(tmp, manifest, figures, checkpoint, start)
    return manifest


def _omega_size(draw) -> int:
    owner = getattr(draw, "__self__", None)
    try:
        return len(owner) if owner is not None else MAX_PROTOTYPES
    except TypeError:
        return MAX_PROTOTYPES
