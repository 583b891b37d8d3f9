"""Sampling from the eager model, and the loop that collects augmentation data.

Strategies (spec §5.1) and everything else that happens between two decoder steps are
the decoding contract of ``compgen.decoding`` (greedy, temperature, mixed, beam of width
``beam_width``; token masks; the counter-based random stream): the eager model is one
more step function (``EagerStepper``) of its one decode loop, so every backend gives the
same samples for the same seed.

``collect_samples`` draws prototype tuples from Omega in batches, decodes, filters
(``compgen.resample.SampleFilter``) until ``nsamples`` are accepted, then keeps the
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

from compgen.data.vocab import Vocab
from compgen.decoding import (  # noqa: F401 (STRATEGIES, check_strategy: re-exported)
    BEAM_WIDTH,
    MODES,
    STRATEGIES,
    Contract,
    beam,
    check_strategy,
    decode,
    mask_ids,
    prior_z,
    rank_key,
    scores_of,
)
from compgen.errors import UserError
from compgen.models.recombine import StepWeights, collate_prototypes
from compgen.sample_options import MAX_ROUNDS, SampleOptions

NEG = float("-inf")


class NoSamples(UserError):
    """No decoded candidate passed the filter: an error, never an empty samples file."""


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
    """The eager model as a step function of the shared decode loop (``compgen.decoding``).
    ``record`` (a list) receives every step's StepWeights (attention and copy)."""

    def __init__(self, model, max_len: int, record: list | None = None):
        self.model, self.max_len, self.record = model, max_len, record

    @torch.no_grad()
    def start(self, protos: np.ndarray, z: np.ndarray, tuple_ids=None) -> None:
        self.memory, self.state = self.model.encode(torch.from_numpy(protos),
                                                    torch.from_numpy(z), self.max_len)

    @torch.no_grad()
    def step(self, token: np.ndarray) -> np.ndarray:
        token = torch.from_numpy(token)
        if self.record is None:
            logp, self.state = self.model.decode_step(token, self.state, self.memory)
        else:
            logp, self.state, weights = self.model.decode_step_with_weights(
                token, self.state, self.memory)
            self.record.append(weights)
        return logp.numpy()

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        index = torch.from_numpy(rows)
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
                 seed: int = 0, sample_ids=None, beam_width: int = BEAM_WIDTH) -> Decoded:
    """Decode one sequence per row of ``protos`` ``(B, K, T)`` with the eager model and
    the shared loop. ``z`` fixes the latent (default: the prior's draw from the random
    stream; zeros without VAE); ``sample_ids`` key the random draws (default 0..B-1).
    ``record`` (a list) receives every step's StepWeights (rows are then never
    compacted, for figures)."""
    check_strategy(strategy)
    contract = replace(model_contract(model, max_len), beam_width=beam_width)
    B = protos.size(0)
    ids = np.arange(B, dtype=np.int64) if sample_ids is None else np.asarray(sample_ids, np.int64)
    latent = _latent(model, contract, z, seed, ids)
    stepper = EagerStepper(model, max_len, record)
    tokens, token_logp = decode(stepper, contract, protos.numpy(), latent, MODES[strategy],
                                temperature, seed, ids, max_len, compact=record is None)
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
    tokens, _, scores = beam(EagerStepper(model, max_len), contract, protos.numpy(), latent,
                             width, max_len)
    pad = np.full((B, width, max_len), contract.pad, np.int64)
    pad[:, :, :tokens.shape[2]] = tokens
    return torch.from_numpy(pad), torch.from_numpy(scores).float()


# ------------------------------------------------------------------ collecting samples

@dataclass
class Sample:
    x: list[str]
    y: list[str]
    logprob: float
    lm_logprob: float | None = None   # set when an n-gram LM scores the samples (--lm)


def _ids_to_tokens(vocab: Vocab, row) -> list[str]:
    return vocab.decode(row, strip=True)


def collect_samples(model, vocab: Vocab, draw_prototypes: Callable[[int], list], n: int,
                    nsamples: int | None = None, strategy: str = "greedy",
                    temperature: float = 1.0, accept: Callable | None = None,
                    batch_size: int = 128, max_rounds: int = MAX_ROUNDS, patience: int = 3,
                    max_len: int = 45, log: Callable[[str], None] = print,
                    raise_temperature: bool = False, seed: int = 0,
                    beam_width: int = BEAM_WIDTH, keep: Callable | None = None) -> list[Sample]:
    """Decode batches of prototype tuples with the eager model until ``nsamples`` samples
    are accepted (or ``max_rounds``), then return the ``n`` best (``keep``, see
    ``collect_decoded``). ``draw_prototypes(k)`` returns k prototype tuples (token lists);
    ``accept(tokens)`` -> (x, y) or None."""
    variant = "scan" if model.scan else "sig"

    def decode(tuples, strategy, temperature, first):
        ids = [[vocab.encode(p) for p in tup] for tup in tuples]
        protos = collate_prototypes(ids, variant, max_len)
        dec = sample_batch(model, protos, strategy, temperature, max_len, seed=seed,
                           sample_ids=first + np.arange(len(tuples)), beam_width=beam_width)
        return dec.tokens.tolist(), dec.scores.tolist()

    return collect_decoded(decode, vocab, draw_prototypes, n, nsamples, strategy, temperature,
                           accept, batch_size, max_rounds, patience, log, raise_temperature, keep)


def collect_decoded(decode: Callable, vocab: Vocab, draw_prototypes: Callable[[int], list],
                    n: int, nsamples: int | None = None, strategy: str = "greedy",
                    temperature: float = 1.0, accept: Callable | None = None,
                    batch_size: int = 128, max_rounds: int = MAX_ROUNDS, patience: int = 3,
                    log: Callable[[str], None] = print,
                    raise_temperature: bool = False, keep: Callable | None = None) -> list[Sample]:
    """The sampling loop shared by every backend (eager, TorchScript, ONNX Runtime, C++):
    ``decode(prototypes, strategy, temperature, first)`` -> (rows of token ids, scores) for
    what ``draw_prototypes(batch_size)`` returned (``first``: the sample index of the
    round's first row, which keys the random stream); rows are filtered with ``accept``. When a
    round accepts nothing new for ``patience`` rounds and ``raise_temperature`` is set, the
    temperature rises by 0.1 (greedy and beam switch to the mixed sampler first).
    ``keep(accepted, n)`` chooses the ``n`` kept from the accepted samples in decoding order
    (default ``most_probable``; ``compgen.lm.rerank.LmRanking.keep`` with an n-gram LM).
    Nothing accepted is a UserError; fewer than ``n`` a logged warning."""
    check_strategy(strategy)
    asked = (strategy, temperature)
    nsamples = max(nsamples or n, n)
    accept = accept or (lambda toks: None)
    kept: list[Sample] = []
    stalled, rounds = 0, 0
    while len(kept) < nsamples and rounds < max_rounds:
        rounds += 1
        rows, scores = decode(draw_prototypes(batch_size), strategy, temperature,
                              (rounds - 1) * batch_size)
        before = len(kept)
        for row, score in zip(rows, scores):
            pair = accept(_ids_to_tokens(vocab, row))
            if pair is not None:
                kept.append(Sample(pair[0], pair[1], score))
        stalled = stalled + 1 if len(kept) == before else 0
        if raise_temperature and stalled >= patience:
            if strategy in ("greedy", "beam"):
                strategy = "mixed"
            else:
                temperature = round(temperature + 0.1, 3)
            log(f"no new samples for {patience} rounds: {strategy} sampling at T {temperature}")
            stalled = 0
    report_shortfall(len(kept), n, rounds, batch_size, asked, (strategy, temperature),
                     max_rounds, raise_temperature, log)
    return (keep or most_probable)(kept, n)


def most_probable(samples: list[Sample], n: int) -> list[Sample]:
    """The ``n`` of highest log-probability, rounded as the contract ranks
    (``rank_key``); the sort is stable, so ties keep the decoding order."""
    return sorted(samples, key=lambda s: rank_key(s.logprob))[:n]


def report_shortfall(kept: int, n: int, rounds: int, batch_size: int, asked: tuple,
                     final: tuple, max_rounds: int, raise_temperature: bool,
                     log: Callable[[str], None]) -> None:
    """Nothing accepted: NoSamples; fewer than ``n``: a warning naming what helps."""
    sampler = f"{asked[0]} sampling at T {asked[1]:g}" + (
        f", raised to {final[0]} at T {final[1]:g}" if tuple(final) != tuple(asked) else "")
    helps = f"--max-rounds (now {max_rounds})" + ("" if raise_temperature else ", --raise-temperature")
    if not kept:
        raise NoSamples(f"no sample passed the filter in {rounds} rounds of {batch_size} "
                        f"({sampler}); train the generator longer or allow more: {helps}")
    if kept < n:
        log(f"warning: {kept} of the {n} samples asked for (--n) passed the filter in "
            f"{rounds} rounds ({sampler}); for more: {helps}")


# ------------------------------------------------------------------ from a checkpoint

@dataclass
class SampleRun:
    samples: list[Sample]
    seconds: float
    out: str | None
    data: str = ""  # the data set the generator was trained on
    decode_seconds: float | None = None  # of ``seconds``, spent in the decode loop


def sig_rare_choice(rare: str | None) -> tuple[str, set[str] | None]:
    """--rare for morphology -> (Omega's rare-tag choice, explicit tag set or None).
    "auto"/"data" = tags with training count in (1, 20]; "fixed" = PST,FUT; or a list."""
    if not rare or rare in ("auto", "data"):
        return "data", None
    tags = {"PST", "FUT"} if rare == "fixed" else {t.strip() for t in rare.split(",") if t.strip()}
    return ("fixed" if tags == {"PST", "FUT"} else "data"), tags


def scan_rare_phrase(split: str, rare: str | None) -> str:
    """The phrase SCAN resampling asks for: --rare, else the split's (jump, around right)."""
    from compgen.resample import DEFAULT_SCAN_RARE

    return rare if rare and rare != "auto" else DEFAULT_SCAN_RARE.get(split, "jump")


def prototype_source(config: dict, table: pl.DataFrame, nproto: int, seed: int,
                     resample: str = "none", rare: str | None = None,
                     rare_prototypes: bool = False):
    """Omega of the checkpoint's data set: a function k -> k prototype tuples.
    ``rare_prototypes`` (SCAN, with rare resampling) keeps only tuples whose prototypes
    contain every word of the rare phrase between them."""
    from compgen import neighborhoods as nb

    data_name = config["data"]
    rng = np.random.default_rng(seed)
    scan = data_name.startswith("scan/")
    if rare_prototypes and (resample != "rare" or not scan or nproto == 0):
        raise UserError("--rare-prototypes: needs --resample rare, a SCAN generator and "
                        "prototypes (SIGMORPHON's Omega is already drawn around rare tags)")
    if nproto == 0:
        return lambda k: [() for _ in range(k)]
    if scan:
        split = data_name.split("/", 1)[1]
        triples = nb.scan_neighborhood(table, split, int(config["train"].get("seed", 0)))
        phrase = scan_rare_phrase(split, rare)
        try:
            omega = nb.scan_omega(nb.unique_generative_data(table), triples, nproto, split,
                                  rng=rng, cover=phrase.split() if rare_prototypes else ())
        except ValueError as e:
            raise UserError(f"--rare {phrase}: {e}") from None
        if len(omega) == 0:
            raise UserError(f"--rare-prototypes: no prototype tuple contains '{phrase}'")
        return omega.sample
    train = table.filter(pl.col("split") == "train")
    choice, _ = sig_rare_choice(rare)
    return nb.sig_omega(train, nproto, resample == "rare", rng, rare=choice).sample


def make_filter(config: dict, table: pl.DataFrame, resample: str, rare: str | None):
    """The acceptance test of the checkpoint's task (novelty: SCAN only, by default)."""
    from compgen import neighborhoods as nb
    from compgen.resample import SampleFilter, contains_rule, rare_tag_rule

    train = table.filter(pl.col("split") == "train")
    pairs = list(zip(train["x"].to_list(), train["y"].to_list()))
    scan = config["data"].startswith("scan/")
    rule = None
    if resample == "rare":
        if scan:
            split = config["data"].split("/", 1)[1]
            rule = contains_rule(scan_rare_phrase(split, rare))
        else:
            choice, tags = sig_rare_choice(rare)
            rule = rare_tag_rule(tags if tags is not None else nb.rare_tags(train, choice))
    elif resample != "none":
        raise UserError(f"--resample {resample}: unknown (valid: none, rare)")
    novel = bool(config.get("sample", {}).get("novel", scan))
    return SampleFilter.from_pairs(pairs, novel=novel, rule=rule, morphology=not scan)


def sample_generator(checkpoint, n: int | None = None, *, out=None, data_dir=None,
                     log: Callable[[str], None] = print, loaded: tuple | None = None,
                     options: SampleOptions | None = None, lm=None, **asked) -> SampleRun:
    """Load a generator checkpoint (or take ``loaded`` = (model, vocab, config)), draw
    ``n`` unique (and, for SCAN, novel) samples, write them as a samples TSV (x, y,
    logprob) if ``out`` is given. ``options`` (else ``asked``, resolved against the
    checkpoint's ``[sample]`` preset): see ``SampleOptions``; ``test_dropout`` overrides
    the checkpoint's ``outdrop_test`` (dropout on the decoder state while sampling, the
    scan reference's source of diversity)."""
    from compgen.checkpoint import load_generator
    from compgen.data import load_dataset
    from compgen.io import write_samples_tsv

    if options is None and asked.get("strategy") is not None:
        check_strategy(asked["strategy"])  # before the checkpoint is loaded
    model, vocab, config = loaded or load_generator(checkpoint)
    options = options or SampleOptions.resolve(config, n=n, **asked)
    if options.threads:
        torch.set_num_threads(options.threads)
    if options.test_dropout is not None:  # scan keeps outdrop on while sampling unless told
        model.outdrop_test = options.test_dropout
    table = load_dataset(config["data"], data_dir)
    accept = make_filter(config, table, options.resample, options.rare).accept
    if lm is not None:   # compgen.lm.rerank.LmRanking: n-gram filter, scores and rerank
        accept = lm.filtered(accept)
    torch.manual_seed(options.seed)
    draw = prototype_source(config, table, model.nproto, options.seed, options.resample,
                            options.rare, options.rare_prototypes)
    start = time.perf_counter()
    samples = collect_samples(model, vocab, draw, options.n, options.nsamples, options.strategy,
                              options.temperature, accept, options.batch_size,
                              max_rounds=options.max_rounds, max_len=model.cfg.max_len, log=log,
                              raise_temperature=options.raise_temperature, seed=options.seed,
                              beam_width=options.beam_width, keep=lm.keep if lm else None)
    seconds = time.perf_counter() - start
    if out is not None:
        from compgen.lm.rerank import sample_columns

        write_samples_tsv(out, [(s.x, s.y) for s in samples], sample_columns(samples))
    return SampleRun(samples, seconds, str(out) if out else None, config["data"])


def scan_quality(run: SampleRun, data_dir=None) -> dict | None:
    """For SCAN generators: how many samples are novel, use the split's held-out primitive
    (``jump`` for jump, else ``right``) in a command absent from training, and are correct
    SCAN pairs according to the full grammar. None for other data."""
    from compgen.data import load_dataset, select_split
    from compgen.data.scan import load_scan_grammar, scan_sample_report
    from compgen.data.sources import resolve_data_dir

    if not run.data.startswith("scan/"):
        return None
    train = select_split(load_dataset(run.data, data_dir), "train")
    primitive = "jump" if "jump" in run.data else "right"
    report = scan_sample_report([(s.x, s.y) for s in run.samples], train,
                                load_scan_grammar(resolve_data_dir(data_dir)), primitive)
    return {**report, "primitive": primitive}
