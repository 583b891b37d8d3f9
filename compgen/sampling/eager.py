"""Sampling from the eager model: the loop that collects augmentation data.

``collect_eager`` draws prototype tuples from Omega in batches, decodes (``decode_batch``
of ``compgen.runtimes.eager``), filters (``compgen.data.resample.SampleFilter``) until
``nsamples`` are accepted, then keeps the ``n`` most probable. Only when asked
(``raise_temperature``, the CLI's ``--raise-temperature``; the reference did this by hand,
per script), a round that accepts nothing new for ``patience`` rounds raises the
temperature by 0.1 (greedy and beam switch to the mixed sampler first). Fewer samples than
``n`` is a warning naming the options that help; none at all is an error.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from compgen.data.task import task_of
from compgen.data.vocab import Vocab
from compgen.decoding.input_trie import InputTrie
from compgen.decoding.options import SampleOptions
from compgen.device import resolve_device, use_tf32
from compgen.io import write_samples_tsv
from compgen.lm.rerank import sample_columns
from compgen.models.recombine import collate_prototypes
from compgen.neighborhoods.omega_source import prototype_source
from compgen.neighborhoods.user_data import has_snapshot, training_table
from compgen.runtimes.eager import decode_batch
from compgen.sampling.collection import (  # noqa: F401 (NoSamples, SampleRun, make_filter: re-exported)
    NoSamples,
    Sample,
    SampleRun,
    Tally,
    check_sig_rare,
    collect_decoded,
    known_input_trie,
    make_filter,
)
from compgen.training.checkpoint import checkpoint_config, load_generator


def collect_eager(model, vocab: Vocab, draw_prototypes: Callable[[int], list],
                  options: SampleOptions, accept: Callable | None = None, *,
                  log: Callable[[str], None] = print, keep: Callable | None = None,
                  tally: Tally | None = None, known_inputs: InputTrie | None = None
                  ) -> list[Sample]:
    """Decode batches of prototype tuples with the eager model until ``options.nsamples``
    samples are accepted (or ``options.max_rounds``), then return the ``options.n`` best
    (``keep``, see ``collect_decoded``). ``draw_prototypes(k)`` returns k prototype tuples
    (token lists); ``accept(tokens)`` -> (x, y) or None."""
    variant, max_len = ("scan" if model.scan else "sig"), model.cfg.max_len

    def decode(tuples, strategy, temperature, first):
        ids = [[vocab.encode(p) for p in tup] for tup in tuples]
        protos = collate_prototypes(ids, variant, max_len)
        dec = decode_batch(model, protos, strategy, temperature, max_len, seed=options.seed,
                           sample_ids=first + np.arange(len(tuples)),
                           beam_width=options.beam_width, known_inputs=known_inputs)
        return dec.tokens.tolist(), dec.scores.tolist()

    return collect_decoded(decode, vocab, draw_prototypes, options, accept, log=log, keep=keep,
                           tally=tally)


def sample_checkpoint(checkpoint, n: int | None = None, *, out=None, data_dir=None,
                      log: Callable[[str], None] = print, loaded: tuple | None = None,
                      options: SampleOptions | None = None, lm=None,
                      tally: Tally | None = None, **asked) -> SampleRun:
    """Load a generator checkpoint (or take ``loaded`` = (model, vocab, config)), draw
    ``n`` unique (and, for SCAN, novel) samples, write them as a samples TSV (x, y,
    logprob) if ``out`` is given. ``options`` (else ``n`` and ``asked``, keywords of
    ``SampleOptions`` over the checkpoint's ``[sample]``; the device: the CPU), built
    before the weights load; ``test_dropout`` overrides the checkpoint's ``outdrop_test``
    (dropout on the decoder state while sampling, the scan reference's source of
    diversity)."""
    if options is None:
        preset = (loaded[2] if loaded else checkpoint_config(checkpoint, "recombine"))
        options = SampleOptions(preset.get("sample", {}), n=n, **{"device": "cpu", **asked})
    model, vocab, config = loaded or load_generator(checkpoint)
    tally = tally or Tally()
    device = resolve_device(options.device)
    if device.cuda:
        use_tf32(device, False)   # fp32 on CUDA is full fp32: the CPU's greedy samples
        model.to(device.torch)
    if options.threads:
        torch.set_num_threads(options.threads)
    if options.test_dropout is not None:  # scan keeps outdrop on while sampling unless told
        model.outdrop_test = options.test_dropout
    table = training_table(config, data_dir)  # user data: the pairs the checkpoint records
    if options.resample == "rare" and not (task_of(config["data"]).scan
                                           or has_snapshot(config)):
        check_sig_rare(options.rare, table, config["data"])
    filt = make_filter(config, table, options.resample, options.rare)
    known_inputs = known_input_trie(filt, vocab, options.novel_inputs)
    accept = filt.accept
    if lm is not None:   # compgen.lm.rerank.LmRanking: n-gram filter, scores and rerank
        accept = lm.filtered(accept)
    torch.manual_seed(options.seed)
    draw = prototype_source(config, table, model.nproto, options.seed, options.resample,
                            options.rare, options.rare_prototypes, options.prototype_cut)
    start = time.perf_counter()
    samples = collect_eager(model, vocab, draw, options, accept, log=log,
                            keep=lm.keep if lm else None, tally=tally, known_inputs=known_inputs)
    seconds = time.perf_counter() - start
    if out is not None:
        write_samples_tsv(out, [(s.x, s.y) for s in samples], sample_columns(samples))
    return SampleRun(samples, seconds, str(out) if out else None, config["data"],
                     decoded=tally.decoded, device=str(device))


