"""Batched decoding on the eager model, and collecting augmentation data.

Strategies (spec §5.1): ``greedy``; ``temperature`` (sample from softmax(logp / T));
``mixed`` (temperature until <sep> has been emitted, greedy after it: sampled inputs,
deterministic outputs); ``beam`` (width 4, no length normalisation; the best final beam
is the sample). Every decoder step is one batched call; finished sequences are tracked
with mask tensors, never with a Python loop over the batch.

Token masks: the first step may not emit <pad> <s> </s> <unk> <sep> <copy>; later steps
may not emit <pad> <s> <unk> <copy>. They are applied to the (copy-marginalised)
log-probabilities of the step.

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
from dataclasses import dataclass

import numpy as np
import polars as pl
import torch
from torch import Tensor

from compgen.data.vocab import BOS_ID, COPY_ID, EOS_ID, PAD_ID, SEP_ID, UNK_ID, Vocab
from compgen.errors import UserError
from compgen.models.recombine import StepWeights, collate_prototypes

STRATEGIES = ("greedy", "temperature", "mixed", "beam")
# batches decoded at most before the sampler gives up with fewer than nsamples accepted
MAX_ROUNDS = 200
FIRST_STEP_BANNED = (PAD_ID, BOS_ID, EOS_ID, UNK_ID, SEP_ID, COPY_ID)
LATER_BANNED = (PAD_ID, BOS_ID, UNK_ID, COPY_ID)
NEG = float("-inf")


class NoSamples(UserError):
    """No decoded candidate passed the filter: an error, never an empty samples file."""


def banned_mask(vocab_size: int, first: bool) -> Tensor:
    mask = torch.zeros(vocab_size, dtype=torch.bool)
    mask[list(FIRST_STEP_BANNED if first else LATER_BANNED)] = True
    return mask


@dataclass
class Decoded:
    tokens: Tensor  # (B, L) ids, <pad> after </s>
    scores: Tensor  # (B,) sum of log p of the emitted tokens (up to and including </s>)


def check_strategy(strategy: str) -> None:
    if strategy not in STRATEGIES:
        raise UserError(f"--strategy {strategy}: unknown (valid: {', '.join(STRATEGIES)})")


@torch.no_grad()
def sample_batch(model, protos: Tensor, strategy: str = "greedy", temperature: float = 1.0,
                 max_len: int = 45, z: Tensor | None = None,
                 record: list | None = None) -> Decoded:
    """Decode one sequence per row of ``protos`` ``(B, K, T)``; greedy/temperature/mixed.
    ``z`` fixes the latent (default: a draw from the prior; zeros without VAE). ``record``
    (a list) receives every step's StepWeights (attention and copy, for figures)."""
    check_strategy(strategy)
    if strategy == "beam":
        tokens, scores = beam_search(model, protos, 4, max_len, z)
        return Decoded(tokens[:, 0], scores[:, 0])
    B = protos.size(0)
    memory, state = model.encode(protos, model.prior_z(B) if z is None else z, max_len)
    first, later = banned_mask(model.vocab_size, True), banned_mask(model.vocab_size, False)
    token = torch.full((B,), BOS_ID, dtype=torch.long)
    out = torch.full((B, max_len), PAD_ID, dtype=torch.long)
    score = torch.zeros(B)
    done = torch.zeros(B, dtype=torch.bool)
    after_sep = torch.zeros(B, dtype=torch.bool)
    for t in range(max_len):
        if record is None:
            logp, state = model.decode_step(token, state, memory)
        else:
            logp, state, weights = model.decode_step_with_weights(token, state, memory)
            record.append(weights)
        logp = logp.masked_fill(first if t == 0 else later, NEG)
        greedy = logp.argmax(1)
        if strategy == "greedy":
            nxt = greedy
        else:
            sampled = torch.multinomial(torch.softmax(logp / temperature, 1), 1)[:, 0]
            nxt = sampled if strategy == "temperature" else torch.where(after_sep, greedy, sampled)
        nxt = torch.where(done, torch.full_like(nxt, PAD_ID), nxt)
        score = score + torch.where(done, torch.zeros_like(score), logp.gather(1, nxt[:, None])[:, 0])
        out[:, t] = nxt
        after_sep |= nxt == SEP_ID
        done |= nxt == EOS_ID
        token = nxt
        if bool(done.all()):
            break
    return Decoded(out, score)


@torch.no_grad()
def greedy_with_weights(model, protos: Tensor, max_len: int = 45,
                        z: Tensor | None = None) -> tuple[Decoded, StepWeights]:
    """Greedy decoding (``sample_batch``) that also keeps what every step attended to, for
    figures: StepWeights with attention and copy ``(B, L, K, T)``."""
    steps: list[StepWeights] = []
    decoded = sample_batch(model, protos, "greedy", max_len=max_len, z=z, record=steps)
    return (Decoded(decoded.tokens[:, :len(steps)], decoded.scores),
            StepWeights(torch.stack([w.attention for w in steps], 1),
                        torch.stack([w.copy for w in steps], 1)))


def _repeat(tup, width: int):
    return type(tup)(*[t.repeat_interleave(width, 0) for t in tup])


def _select(tup, index: Tensor):
    return type(tup)(*[t.index_select(0, index) for t in tup])


@torch.no_grad()
def beam_search(model, protos: Tensor, width: int = 4, max_len: int = 45,
                z: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Beam search; returns hypotheses ``(B, W, L)`` and their log-probabilities
    ``(B, W)``, best first. A finished beam continues with <pad> at +0."""
    B, W, V = protos.size(0), width, model.vocab_size
    memory, state = model.encode(protos, model.prior_z(B) if z is None else z, max_len)
    memory, state = _repeat(memory, W), _repeat(state, W)
    first, later = banned_mask(V, True), banned_mask(V, False)
    finished_row = torch.full((V,), NEG)
    finished_row[PAD_ID] = 0.0
    scores = torch.full((B, W), NEG)
    scores[:, 0] = 0.0  # one live hypothesis at the start
    hist = torch.full((B, W, max_len), PAD_ID, dtype=torch.long)
    done = torch.zeros(B, W, dtype=torch.bool)
    token = torch.full((B * W,), BOS_ID, dtype=torch.long)
    for t in range(max_len):
        logp, state = model.decode_step(token, state, memory)
        logp = logp.masked_fill(first if t == 0 else later, NEG).view(B, W, V)
        logp = torch.where(done[..., None], finished_row, logp)
        cand = (scores[..., None] + logp).view(B, W * V)
        scores, flat = cand.topk(W, dim=1)
        beam, tok = flat // V, flat % V
        hist = hist.gather(1, beam[..., None].expand(-1, -1, max_len))
        hist[:, :, t] = tok
        done = done.gather(1, beam) | (tok == EOS_ID)
        state = _select(state, (beam + torch.arange(B)[:, None] * W).flatten())
        token = tok.flatten()
        if bool(done.all()):
            break
    return hist, scores


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
                    raise_temperature: bool = False) -> list[Sample]:
    """Decode batches of prototype tuples with the eager model until ``nsamples`` samples
    are accepted (or ``max_rounds``), then return the ``n`` most probable.
    ``draw_prototypes(k)`` returns k prototype tuples (token lists); ``accept(tokens)`` ->
    (x, y) or None."""
    variant = "scan" if model.scan else "sig"

    def decode(tuples, strategy, temperature):
        ids = [[vocab.encode(p) for p in tup] for tup in tuples]
        protos = collate_prototypes(ids, variant, max_len)
        dec = sample_batch(model, protos, strategy, temperature, max_len)
        return dec.tokens.tolist(), dec.scores.tolist()

    return collect_decoded(decode, vocab, draw_prototypes, n, nsamples, strategy, temperature,
                           accept, batch_size, max_rounds, patience, log, raise_temperature)


def collect_decoded(decode: Callable, vocab: Vocab, draw_prototypes: Callable[[int], list],
                    n: int, nsamples: int | None = None, strategy: str = "greedy",
                    temperature: float = 1.0, accept: Callable | None = None,
                    batch_size: int = 128, max_rounds: int = MAX_ROUNDS, patience: int = 3,
                    log: Callable[[str], None] = print,
                    raise_temperature: bool = False) -> list[Sample]:
    """The sampling loop shared by every backend (eager, TorchScript, ONNX Runtime, C++):
    ``decode(prototypes, strategy, temperature)`` -> (rows of token ids, scores) for what
    ``draw_prototypes(batch_size)`` returned; rows are filtered with ``accept``. When a
    round accepts nothing new for ``patience`` rounds and ``raise_temperature`` is set, the
    temperature rises by 0.1 (greedy and beam switch to the mixed sampler first).
    Nothing accepted is a UserError; fewer than ``n`` a logged warning."""
    check_strategy(strategy)
    asked = (strategy, temperature)
    nsamples = max(nsamples or n, n)
    accept = accept or (lambda toks: None)
    kept: list[Sample] = []
    stalled, rounds = 0, 0
    while len(kept) < nsamples and rounds < max_rounds:
        rounds += 1
        rows, scores = decode(draw_prototypes(batch_size), strategy, temperature)
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
    sampler = f"{asked[0]} sampling at T {asked[1]:g}" + (
        f", raised to {strategy} at T {temperature:g}" if (strategy, temperature) != asked else "")
    helps = f"--max-rounds (now {max_rounds})" + ("" if raise_temperature else ", --raise-temperature")
    if not kept:
        raise NoSamples(f"no sample passed the filter in {rounds} rounds of {batch_size} "
                        f"({sampler}); train the generator longer or allow more: {helps}")
    if len(kept) < n:
        log(f"warning: {len(kept)} of the {n} samples asked for (--n) passed the filter in "
            f"{rounds} rounds ({sampler}); for more: {helps}")
    kept.sort(key=lambda s: -s.logprob)
    return kept[:n]


# ------------------------------------------------------------------ from a checkpoint

@dataclass
class SampleRun:
    samples: list[Sample]
    seconds: float
    out: str | None
    data: str = ""  # the data set the generator was trained on


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


def sampling_options(config: dict, strategy: str | None, n: int | None, nsamples: int | None,
                     temperature: float | None, max_rounds: int | None = None
                     ) -> tuple[str, int, int, float, int]:
    """Options left unset take the checkpoint's ``[sample]`` preset; checked here once for
    every backend. ``nsamples`` (accepted before keeping the best ``n``) scales with ``n``;
    ``max_rounds`` falls back to the preset's, else ``MAX_ROUNDS``."""
    scfg = config.get("sample", {})
    strategy = strategy or scfg.get("strategy", "greedy")
    check_strategy(strategy)
    n = n or int(scfg.get("n", 400))
    if n < 1:
        raise UserError("--n must be >= 1")
    nsamples = nsamples or max(n, round(n * int(scfg.get("nsamples", n)) / int(scfg.get("n", n))))
    if nsamples < n:
        raise UserError(f"--nsamples {nsamples} must be >= --n {n} (the n most probable of nsamples are kept)")
    temperature = temperature if temperature is not None else float(scfg.get("temperature", 1.0))
    if temperature <= 0:
        raise UserError("--temperature must be > 0")
    max_rounds = max_rounds or int(scfg.get("max_rounds", MAX_ROUNDS))
    return strategy, n, nsamples, temperature, max_rounds


def sample_generator(checkpoint, n: int | None = None, *, strategy: str | None = None,
                     temperature: float | None = None, resample: str | None = None,
                     rare: str | None = None, nsamples: int | None = None,
                     batch_size: int | None = None, seed: int = 0, out=None, data_dir=None,
                     threads: int | None = None, test_dropout: bool | None = None,
                     max_rounds: int | None = None, rare_prototypes: bool | None = None,
                     log: Callable[[str], None] = print, loaded: tuple | None = None,
                     raise_temperature: bool = False, lm=None) -> SampleRun:
    """Load a generator checkpoint (or take ``loaded`` = (model, vocab, config)), draw
    ``n`` unique (and, for SCAN, novel) samples,
    write them as a samples TSV (x, y, logprob) if ``out`` is given. ``test_dropout``
    overrides the checkpoint's ``outdrop_test`` (dropout on the decoder state while
    sampling, the scan reference's source of diversity). ``max_rounds`` bounds the batches
    decoded when the filter accepts few candidates (default: the preset's, else 200).
    ``rare_prototypes``: see :func:`prototype_source` (default: the preset's, else off).
    ``lm`` (``compgen.lm.rerank.LmRanking``): n-gram scores, filter and rerank."""
    from compgen.checkpoint import load_generator
    from compgen.data import load_dataset
    from compgen.io import write_samples_tsv

    if strategy is not None:
        check_strategy(strategy)
    if threads:
        torch.set_num_threads(threads)
    model, vocab, config = loaded or load_generator(checkpoint)
    if test_dropout is not None:  # scan keeps outdrop on while sampling unless told not to
        model.outdrop_test = test_dropout
    scfg = config.get("sample", {})
    strategy, n, nsamples, temperature, max_rounds = sampling_options(
        config, strategy, n, nsamples, temperature, max_rounds)
    resample = resample or scfg.get("resample", "none")
    rare = rare or scfg.get("rare")
    table = load_dataset(config["data"], data_dir)
    accept = make_filter(config, table, resample, rare).accept
    if lm is not None:
        accept = lm.filtered(accept)
    torch.manual_seed(seed)
    if rare_prototypes is None:
        rare_prototypes = bool(scfg.get("rare_prototypes", False))
    draw = prototype_source(config, table, model.nproto, seed, resample, rare, rare_prototypes)
    start = time.perf_counter()
    # with an LM, every accepted candidate is kept until the LM has ranked them
    samples = collect_samples(model, vocab, draw, n if lm is None else nsamples, nsamples,
                              strategy, temperature, accept,
                              batch_size or int(scfg.get("batch_size", 128)),
                              max_rounds=max_rounds, max_len=model.cfg.max_len, log=log,
                              raise_temperature=raise_temperature)
    if lm is not None:
        samples = lm.keep(samples, n)
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
