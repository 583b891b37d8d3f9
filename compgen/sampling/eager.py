"""Sampling from the eager model, and the loop that collects augmentation data.

Strategies (spec §5.1) and everything else that happens between two decoder steps are
the decoding contract of ``compgen.decoding`` (greedy, temperature, mixed, beam of width
``beam_width``; token masks; the counter-based random stream): the eager model is one
more step function (``EagerStepper``) of its searches, so every backend gives the
same samples for the same seed.

``collect_samples`` draws prototype tuples from Omega in batches, decodes, filters
(``compgen.data.resample.SampleFilter``) until ``nsamples`` are accepted, then keeps the
``n`` most probable. Only when asked (``raise_temperature``, the CLI's
``--raise-temperature``; the reference did this by hand, per script), a round that accepts
nothing new for ``patience`` rounds raises the temperature by 0.1 (greedy and beam switch
to the mixed sampler first). Fewer samples than ``n`` is a warning naming the options that
help; none at all is an error.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import polars as pl
import torch
from torch import Tensor

from compgen import neighborhoods as nb
from compgen.data.vocab import Vocab
from compgen.decoding.contract import (
    BEAM_WIDTH,
    Contract,
    mask_ids,
    prior_z,
    scores_of,
)
from compgen.decoding.input_trie import InputTrie
from compgen.decoding.search import BeamSearch, decode, search_for
from compgen.device import resolve_device, use_tf32
from compgen.errors import SettingError
from compgen.io import write_samples_tsv
from compgen.lm.rerank import sample_columns
from compgen.models.recombine import StepWeights, collate_prototypes
from compgen.neighborhoods.user_data import has_snapshot, training_table, user_prototype_source
from compgen.sampling.collection import (  # noqa: F401 (NoSamples, SampleRun, make_filter: re-exported)
    NoSamples,
    Sample,
    SampleRun,
    Tally,
    check_sig_rare,
    collect_decoded,
    known_input_trie,
    make_filter,
    scan_rare_phrase,
    sig_rare_choice,
)
from compgen.sampling.options import MAX_ROUNDS, SampleOptions
from compgen.training.checkpoint import checkpoint_config, load_generator


def banned_mask(vocab_size: int, first: bool) -> Tensor:
    mask = torch.zeros(vocab_size, dtype=torch.bool)
    mask[list(mask_ids(first))] = True
    return mask


@dataclass
class Decoded:
    tokens: Tensor  # (B, L) ids, <pad> after </s>
    scores: Tensor  # (B,) sum of log p of the emitted tokens (up to and including </s>)


def _select(tup, index: Tensor):
    return type(tup)(*[t.index_select(0, index) for t in tup])


class EagerStepper:
    """The eager model as a step function of the shared searches (``compgen.decoding``).
    ``record`` (a list) receives every step's StepWeights (attention and copy)."""

    def __init__(self, model, max_len: int, record: list | None = None):
        self.model, self.max_len, self.record = model, max_len, record
        device = next(model.parameters()).device   # a model on a GPU: the steps run there
        self.device = device if device.type != "cpu" else None

    def _on(self, array: np.ndarray) -> Tensor:
        tensor = torch.from_numpy(array)
        return tensor if self.device is None else tensor.to(self.device)

    @torch.no_grad()
    def start(self, protos: np.ndarray, z: np.ndarray) -> None:
        self.memory, self.state = self.model.encode(self._on(protos), self._on(z), self.max_len)

    def started(self, memory, state) -> EagerStepper:
        """This stepper on an encoding made elsewhere (Memory and State of the model)."""
        self.memory, self.state = memory, state
        return self

    @torch.no_grad()
    def step(self, token: np.ndarray) -> np.ndarray:
        token = self._on(token)
        if self.record is None:
            logp, self.state = self.model.decode_step(token, self.state, self.memory)
        else:
            logp, self.state, weights = self.model.decode_step_with_weights(
                token, self.state, self.memory)
            self.record.append(weights)
        return logp.numpy() if self.device is None else logp.cpu().numpy()

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        index = self._on(rows)
        self.state = _select(self.state, index)
        if memory:
            self.memory = _select(self.memory, index)


def model_contract(model, max_len: int | None = None) -> Contract:
    contract = Contract.for_model(model)
    return contract if max_len is None else replace(contract, max_len=max_len)


def _latent(model, contract: Contract, z, seed: int, ids: np.ndarray) -> np.ndarray:
    if z is not None:
        return z.numpy() if isinstance(z, Tensor) else np.asarray(z, np.float32)
    return prior_z(contract, seed, ids)


def sample_batch(model, protos: Tensor, strategy: str = "greedy", temperature: float = 1.0,
                 max_len: int = 45, z: Tensor | None = None, record: list | None = None,
                 seed: int = 0, sample_ids=None, beam_width: int = BEAM_WIDTH,
                 known_inputs: InputTrie | None = None) -> Decoded:
    """Decode one sequence per row of ``protos`` ``(B, K, T)`` with the eager model and
    the shared loop. ``z`` fixes the latent (default: the prior's draw from the random
    stream; zeros without VAE); ``sample_ids`` key the random draws (default 0..B-1).
    ``record`` (a list) receives every step's StepWeights (rows are then never
    compacted, for figures). ``known_inputs``: ``<sep>`` masked after these inputs
    (``compgen.decoding.input_trie``)."""
    contract = replace(model_contract(model, max_len), beam_width=beam_width)
    B = protos.size(0)
    ids = np.arange(B, dtype=np.int64) if sample_ids is None else np.asarray(sample_ids, np.int64)
    latent = _latent(model, contract, z, seed, ids)
    stepper = EagerStepper(model, max_len, record)
    search = search_for(strategy, temperature, seed, beam_width, compact=record is None,
                        known_inputs=known_inputs)
    tokens, token_logp = decode(stepper, contract, protos.numpy(), latent, search, ids, max_len)
    return Decoded(torch.from_numpy(tokens), torch.from_numpy(scores_of(token_logp)).float())


def greedy_with_weights(model, protos: Tensor, max_len: int = 45,
                        z: Tensor | None = None) -> tuple[Decoded, StepWeights]:
    """Greedy decoding (``sample_batch``) that also keeps what every step attended to, for
    figures: StepWeights with attention and copy ``(B, L, K, T)``."""
    steps: list[StepWeights] = []
    decoded = sample_batch(model, protos, "greedy", max_len=max_len, z=z, record=steps)
    return (Decoded(decoded.tokens[:, :len(steps)], decoded.scores),
            StepWeights(torch.stack([w.attention for w in steps], 1),
                        torch.stack([w.copy for w in steps], 1)))


def beam_search(model, protos: Tensor, width: int = BEAM_WIDTH, max_len: int = 45,
                z: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Beam search (the shared loop); returns hypotheses ``(B, W, L)`` and their
    log-probabilities ``(B, W)``, best first. A finished beam continues with <pad> at +0."""
    contract = model_contract(model, max_len)
    B = protos.size(0)
    latent = _latent(model, contract, z, 0, np.arange(B))
    stepper = EagerStepper(model, max_len)
    stepper.start(protos.numpy(), latent)
    tokens, _, scores = BeamSearch(width).hypotheses(stepper, contract.rules(), B, max_len)
    pad = np.full((B, width, max_len), contract.pad, np.int64)
    pad[:, :, :tokens.shape[2]] = tokens
    return torch.from_numpy(pad), torch.from_numpy(scores).float()


# ------------------------------------------------------------------ collecting samples

def collect_samples(model, vocab: Vocab, draw_prototypes: Callable[[int], list], n: int,
                    nsamples: int | None = None, strategy: str = "greedy",
                    temperature: float = 1.0, accept: Callable | None = None,
                    batch_size: int = 128, max_rounds: int = MAX_ROUNDS, patience: int = 3,
                    max_len: int = 45, log: Callable[[str], None] = print,
                    raise_temperature: bool = False, seed: int = 0,
                    beam_width: int = BEAM_WIDTH, keep: Callable | None = None,
                    tally: Tally | None = None,
                    known_inputs: InputTrie | None = None) -> list[Sample]:
    """Decode batches of prototype tuples with the eager model until ``nsamples`` samples
    are accepted (or ``max_rounds``), then return the ``n`` best (``keep``, see
    ``collect_decoded``). ``draw_prototypes(k)`` returns k prototype tuples (token lists);
    ``accept(tokens)`` -> (x, y) or None."""
    variant = "scan" if model.scan else "sig"

    def decode(tuples, strategy, temperature, first):
        ids = [[vocab.encode(p) for p in tup] for tup in tuples]
        protos = collate_prototypes(ids, variant, max_len)
        dec = sample_batch(model, protos, strategy, temperature, max_len, seed=seed,
                           sample_ids=first + np.arange(len(tuples)), beam_width=beam_width,
                           known_inputs=known_inputs)
        return dec.tokens.tolist(), dec.scores.tolist()

    return collect_decoded(decode, vocab, draw_prototypes, n, nsamples, strategy, temperature,
                           accept, batch_size, max_rounds, patience, log, raise_temperature, keep,
                           tally=tally)


# ------------------------------------------------------------------ from a checkpoint

def prototype_source(config: dict, table: pl.DataFrame, nproto: int, seed: int,
                     resample: str = "none", rare: str | None = None,
                     rare_prototypes: bool = False, prototype_cut: str = "mean"):
    """Omega of the checkpoint's data set: a function k -> k prototype tuples.
    ``rare_prototypes`` (SCAN, with rare resampling) keeps only tuples whose prototypes
    contain every word of the rare phrase between them; ``prototype_cut`` (SCAN) is the
    length cut of its prototypes, ``mean`` (the reference's code), ``mean+std`` (the
    paper's text) or ``none`` (any length)."""
    if has_snapshot(config):  # the user's own data: Omega from the recorded pairs
        return user_prototype_source(config, table, nproto, seed, resample, rare,
                                     rare_prototypes, prototype_cut)
    data_name = config["data"]
    rng = np.random.default_rng(seed)
    scan = data_name.startswith("scan/")
    if rare_prototypes and (resample != "rare" or not scan or nproto == 0):
        raise SettingError("`rare_prototypes`: needs `resample` rare, a SCAN generator and "
                           "prototypes (SIGMORPHON's Omega is already drawn around rare tags)")
    if prototype_cut != "mean" and (not scan or nproto == 0):
        raise SettingError("`prototype_cut`: only SCAN generators with prototypes draw them by "
                           "length (SIGMORPHON's Omega is drawn around rare tags)")
    if nproto == 0:
        return lambda k: [() for _ in range(k)]
    if scan:
        split = data_name.split("/", 1)[1]
        triples = nb.scan_neighborhood(table, split, int(config["train"].get("seed", 0)))
        phrase = scan_rare_phrase(split, rare)
        try:
            omega = nb.scan_omega(nb.unique_generative_data(table), triples, nproto, split,
                                  rng=rng, threshold=prototype_cut,
                                  cover=phrase.split() if rare_prototypes else ())
        except ValueError as e:
            raise SettingError(f"`rare` {phrase}: {e}") from None
        if len(omega) == 0:
            raise SettingError(f"`rare_prototypes`: no prototype tuple contains '{phrase}'")
        return omega.sample
    train = table.filter(pl.col("split") == "train")
    choice, _ = sig_rare_choice(rare)
    return nb.sig_omega(train, nproto, resample == "rare", rng, rare=choice).sample


def sample_generator(checkpoint, n: int | None = None, *, out=None, data_dir=None,
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
    if options.device != "cpu":
        device = resolve_device(options.device)
        use_tf32(device, False)   # fp32 on CUDA is full fp32: the CPU's greedy samples
        model.to(device.torch)
    if options.threads:
        torch.set_num_threads(options.threads)
    if options.test_dropout is not None:  # scan keeps outdrop on while sampling unless told
        model.outdrop_test = options.test_dropout
    table = training_table(config, data_dir)  # user data: the pairs the checkpoint records
    if options.resample == "rare" and not (config["data"].startswith("scan/")
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
    samples = collect_samples(model, vocab, draw, options.n, options.nsamples, options.strategy,
                              options.temperature, accept, options.batch_size,
                              max_rounds=options.max_rounds, max_len=model.cfg.max_len, log=log,
                              raise_temperature=options.raise_temperature, seed=options.seed,
                              beam_width=options.beam_width, keep=lm.keep if lm else None,
                              tally=tally, known_inputs=known_inputs)
    seconds = time.perf_counter() - start
    if out is not None:
        write_samples_tsv(out, [(s.x, s.y) for s in samples], sample_columns(samples))
    return SampleRun(samples, seconds, str(out) if out else None, config["data"],
                     decoded=tally.decoded, device=options.device)


