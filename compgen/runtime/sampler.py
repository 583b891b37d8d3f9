"""Sampling from an export folder with any backend: ONNX Runtime, TorchScript, the C++
runner, or the eager model the folder was exported from.

All backends run the same loop (``compgen.sampling.collect_decoded``) with the same
filters (validity, uniqueness, novelty, rare-token resampling, ``compgen.resample``);
only the decoding of a batch differs. Prototype tuples are taken in order from the
folder's ``prototypes.txt`` (cycling), so backends see the same prototypes.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from compgen.data.vocab import EOS_ID, SEP_ID, Vocab
from compgen.errors import UserError
from compgen.export import load_manifest, pad_tuples, read_prototypes
from compgen.sampling import SampleRun, collect_decoded, make_filter, sampling_options

BACKENDS = ("onnx", "torchscript", "cpp", "torch")
MODES = {"greedy": 0, "temperature": 1, "mixed": 2}


class PrototypeCycle:
    """Hands out consecutive prototype indices, cycling over the stored list."""

    def __init__(self, size: int):
        self.size, self.cursor = size, 0

    def __call__(self, k: int) -> np.ndarray:
        idx = (self.cursor + np.arange(k)) % max(self.size, 1)
        self.cursor += k
        return idx


def prior_z(rng: np.random.Generator, batch: int, manifest: dict) -> np.ndarray:
    """The latent the eager model would draw: zeros, or the vMF prior (uniform direction,
    norm uniform in [0, max_norm])."""
    model = manifest["model"]
    if not model["vae"]:
        return np.zeros((batch, model["latent"]), np.float32)
    direction = rng.standard_normal((batch, model["latent"]))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    return (direction * rng.uniform(0, model["max_norm"], (batch, 1))).astype(np.float32)


def _rows_and_scores(tokens: np.ndarray, logp: np.ndarray) -> tuple[list, list]:
    return tokens.tolist(), logp.sum(1).tolist()


def make_decoder(folder: Path, manifest: dict, backend: str, seed: int,
                 threads: int | None, log: Callable, batch_size: int = 128,
                 lm=None) -> Callable:
    """``decode(prototype indices, strategy, temperature) -> (rows, scores)`` for a backend.
    (The C++ runner decodes in batches of ``batch_size`` inside one process; with ``lm``
    it also scores every sample with KenLM and hands the scores to ``lm``.)"""
    nproto, max_len = manifest["model"]["nproto"], manifest["decoding"]["max_len"]
    tuples = read_prototypes(folder / "prototypes.txt", nproto)
    rng = np.random.default_rng(seed)

    def batch(idx):
        chosen = [tuples[i] for i in idx] if nproto else []
        return pad_tuples(chosen, nproto, len(idx))

    if backend == "onnx":
        from compgen.export.onnx_decoder import OnnxGenerator

        onnx = OnnxGenerator(folder, manifest, threads)

        def decode(idx, strategy, temperature):
            protos = batch(idx).numpy()
            z = prior_z(rng, len(idx), manifest)
            if strategy == "beam":
                return _rows_and_scores(*onnx.beam(protos, z, max_len, 4))
            return _rows_and_scores(*onnx.decode(protos, z, max_len, temperature,
                                                 MODES[strategy], rng))
        return decode

    if backend == "torchscript":
        if threads:
            torch.set_num_threads(threads)
        torch.manual_seed(seed)
        scripted = torch.jit.load(str(folder / "model.ts"))

        def decode(idx, strategy, temperature):
            protos = batch(idx)
            z = torch.from_numpy(prior_z(rng, len(idx), manifest))
            with torch.no_grad():
                if strategy == "beam":
                    out = scripted.beam(protos, z, max_len, 4)
                else:
                    out = scripted.decode(protos, z, max_len, temperature, MODES[strategy])
            return _rows_and_scores(out[0].numpy(), out[1].numpy())
        return decode

    if backend == "cpp":
        from compgen.export.cpp_runner import (
            build_runner,
            read_cpp_lm_scores,
            read_cpp_samples,
            run_cpp,
        )

        binary = build_runner(log=log, kenlm=lm is not None)
        vocab = Vocab.load(folder / "vocab.json")
        rounds = [0]
        max_norm = manifest["model"]["max_norm"] if manifest["model"]["vae"] else 0.0

        def decode(idx, strategy, temperature):
            handle, name = tempfile.mkstemp(prefix="compgen-cpp-", suffix=".tsv")
            os.close(handle)
            out = Path(name)
            rounds[0] += 1
            try:
                run_cpp(binary, folder, out, n=len(idx), batch_size=min(len(idx), batch_size),
                        strategy=strategy, seed=seed + rounds[0], max_len=max_len,
                        offset=int(idx[0]) if len(idx) else 0, temperature=temperature,
                        vae_max_norm=max_norm, threads=threads,
                        lm_args=lm.runner_args() if lm is not None else None)
                samples = read_cpp_samples(out)
                if lm is not None:
                    for (x, y, _, _), lm_logp in zip(samples, read_cpp_lm_scores(out)):
                        lm.remember(x, y, lm_logp)
            finally:
                out.unlink(missing_ok=True)
            rows, scores = [], []
            for x, y, logp, _ in samples:
                # a row without "<sep> y" is invalid either way; don't invent a separator
                rows.append(vocab.encode(x) + ([SEP_ID] + vocab.encode(y) if y else []) + [EOS_ID])
                scores.append(logp)
            return rows, scores
        return decode

    raise UserError(f"--backend {backend}: unknown (valid: {', '.join(BACKENDS)})")


def eager_model(folder: Path, manifest: dict) -> tuple:
    """(model, vocab, config) of an export folder for ``--backend torch``: the eager model
    rebuilt from the manifest's config and the weights stored in ``model.ts`` (folders of
    earlier versions carry them as ``generator.pt``)."""
    from compgen.checkpoint import build_recombine, load_generator

    if (folder / "generator.pt").is_file():
        return load_generator(folder / "generator.pt")
    vocab = Vocab.load(folder / "vocab.json")
    model = build_recombine(manifest["config"], len(vocab))
    prefix = "encoder.model."  # the scripted sampler's encoder holds every eager weight
    scripted = torch.jit.load(str(folder / "model.ts")).state_dict()
    model.load_state_dict({k.removeprefix(prefix): v for k, v in scripted.items()
                           if k.startswith(prefix)})
    model.eval()
    return model, vocab, manifest["config"]


def sample_exported(folder, n: int | None = None, *, backend: str = "onnx",
                    strategy: str | None = None, temperature: float | None = None,
                    resample: str | None = None, rare: str | None = None,
                    nsamples: int | None = None, batch_size: int | None = None, seed: int = 0,
                    out=None, data_dir=None, threads: int | None = None,
                    max_rounds: int | None = None, rare_prototypes: bool | None = None,
                    log: Callable[[str], None] = print,
                    raise_temperature: bool = False, lm=None,
                    decoder_factory: Callable | None = None) -> SampleRun:
    """Draw ``n`` unique (SCAN: novel) samples from an export folder with ``backend``.
    ``lm`` (``compgen.lm.rerank.LmRanking``): n-gram scores, filter and rerank.
    ``decoder_factory`` replaces ``make_decoder`` (Ray: ``ray_sampling.ray_decoder_factory``).
    Exported graphs decode the prototype tuples drawn at export time; ``rare_prototypes``
    (a different Omega) needs ``backend="torch"``."""
    from compgen.data import load_dataset
    from compgen.io import write_samples_tsv

    if backend not in BACKENDS:
        raise UserError(f"--backend {backend}: unknown (valid: {', '.join(BACKENDS)})")
    folder = Path(folder)
    manifest = load_manifest(folder)
    if manifest.get("kind", "recombine") != "recombine":
        raise UserError(f"{folder}: a '{manifest['kind']}' export; only generator exports "
                        "sample (predictors: compgen.runtime.predictor.predict_exported)")
    if backend == "torch":
        from compgen.sampling import sample_generator

        return sample_generator(folder, n, strategy=strategy, loaded=eager_model(folder, manifest),
                                temperature=temperature, resample=resample, rare=rare,
                                nsamples=nsamples, batch_size=batch_size, seed=seed, out=out,
                                data_dir=data_dir, threads=threads, max_rounds=max_rounds,
                                rare_prototypes=rare_prototypes, log=log,
                                raise_temperature=raise_temperature, lm=lm)
    if rare_prototypes:
        raise UserError("--rare-prototypes: an export decodes the prototype tuples drawn at "
                        "export time; use --backend torch")
    config = manifest["config"]
    scfg = config.get("sample", {})
    strategy, n, nsamples, temperature, max_rounds = sampling_options(
        config, strategy, n, nsamples, temperature, max_rounds)
    table = load_dataset(config["data"], data_dir)
    accept = make_filter(config, table, resample or scfg.get("resample", "none"), rare).accept
    if lm is not None:
        accept = lm.filtered(accept)
    vocab = Vocab.load(folder / "vocab.json")
    batch_size = batch_size or int(scfg.get("batch_size", 128))
    if decoder_factory is not None and hasattr(decoder_factory, "check"):
        decoder_factory.check(manifest, backend, strategy)
    decode = (decoder_factory or make_decoder)(folder, manifest, backend, seed, threads, log,
                                               batch_size, lm)
    # one C++ process per round: make rounds large so process start-up is paid rarely
    round_size = max(batch_size, 4 * nsamples) if backend == "cpp" else batch_size
    draw = PrototypeCycle(manifest["decoding"]["prototypes"])
    start = time.perf_counter()
    # with an LM, every accepted candidate is kept until the LM has ranked them
    samples = collect_decoded(decode, vocab, draw, n if lm is None else nsamples, nsamples,
                              strategy, temperature, accept, round_size, max_rounds, log=log,
                              raise_temperature=raise_temperature)
    if lm is not None:
        samples = lm.keep(samples, n)
    seconds = time.perf_counter() - start
    if out is not None:
        from compgen.lm.rerank import sample_columns

        write_samples_tsv(out, [(s.x, s.y) for s in samples], sample_columns(samples))
    return SampleRun(samples, seconds, str(out) if out else None, config["data"])
