"""Collecting samples from decoded rounds, whichever backend decoded them: the filters of
a generator's task, the one loop that decodes until enough are accepted, the ``n`` most
probable, and the shortfall report. No model code and no torch here: the C++ runner's
path of ``compgen sample`` uses the filters and result types without loading torch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import polars as pl

from compgen import neighborhoods as nb
from compgen.data import load_dataset, select_split
from compgen.data.resample import (
    SampleFilter,
    contains_rule,
    rare_tag_rule,
    scan_rare_phrase,
    sig_rare_choice,
)
from compgen.data.scan import load_scan_grammar, scan_sample_report
from compgen.data.sources import resolve_data_dir
from compgen.data.task import task_of
from compgen.data.vocab import SEP, Vocab
from compgen.decoding.contract import rank_key
from compgen.decoding.input_trie import InputTrie
from compgen.decoding.options import NO_ROUND_CAP, SampleOptions
from compgen.errors import SettingError, UserError
from compgen.neighborhoods.user_data import user_filter
from compgen.sampling.journal import Journal, Position

PROGRESS_ROUNDS = 100  # a long run says how far it is every this many rounds


class NoSamples(SettingError):
    """No decoded candidate passed the filter: an error, never an empty samples file. It
    names the settings that help (the command line prints their flags)."""


@dataclass
class Sample:
    x: list[str]
    y: list[str]
    logprob: float
    lm_logprob: float | None = None   # set when an n-gram LM scores the samples (--lm)


def _ids_to_tokens(vocab: Vocab, row) -> list[str]:
    return vocab.decode(row, strip=True)


@dataclass
class Tally:
    """What a sampling job has done so far: candidates decoded, rounds, accepted.
    ``on_round(tally)``, when set, is called after every round (a progress bar)."""
    decoded: int = 0
    rounds: int = 0
    accepted: int = 0
    wanted: int = 0
    on_round: Callable | None = None

    def record(self, rows: int, accepted: int) -> None:
        self.rounds += 1
        self.decoded += rows
        self.accepted = accepted
        if self.on_round is not None:
            self.on_round(self)


def collect_decoded(decode: Callable, vocab: Vocab, draw_prototypes: Callable[[int], list],
                    options: SampleOptions, accept: Callable | None = None, *,
                    patience: int = 3, log: Callable[[str], None] = print,
                    keep: Callable | None = None, max_rows: int | None = None,
                    tally: Tally | None = None, journal: Journal | None = None) -> list[Sample]:
    """The sampling loop shared by every backend (eager, TorchScript, ONNX Runtime, C++),
    for the job ``options`` (its n, nsamples, strategy, temperature, batch size, rounds and
    raise_temperature): ``decode(prototypes, strategy, temperature, first)`` -> (rows of
    token ids, scores) for what ``draw_prototypes(batch_size)`` returned (``first``: the sample index of the
    round's first row, which keys the random stream); rows are filtered with ``accept``. When a
    round accepts nothing new for ``patience`` rounds and ``raise_temperature`` is set, the
    temperature rises by 0.1 (greedy and beam switch to the mixed sampler first).
    ``max_rounds`` 0 (``NO_ROUND_CAP``): rounds until ``nsamples`` are accepted, as the
    reference's scripts (a filter that accepts nothing then never ends).
    Every ``PROGRESS_ROUNDS`` rounds it logs how many are accepted (the C++ runner, which
    runs this loop natively, gives its figures after every round to the progress bar).
    ``keep(accepted, n)`` chooses the ``n`` kept from the accepted samples in decoding order
    (default ``most_probable``; ``compgen.lm.rerank.LmRanking.keep`` with an n-gram LM).
    ``max_rows`` bounds the rows decoded in all (the last round is cut short): a
    deterministic decoder has nothing new to say past one pass over its prototype tuples.
    ``tally`` (updated in place) counts what was decoded and accepted. ``journal``
    (``compgen.sampling.journal``) receives every round's accepted samples; one read back
    for ``--resume`` starts the loop where it stopped (``draw_prototypes`` is then
    already at its first row).
    Nothing accepted is a UserError; fewer than ``n`` a logged warning."""
    n, nsamples, batch_size = options.n, options.nsamples, options.batch_size
    strategy, temperature = asked = (options.strategy, options.temperature)
    max_rounds, raise_temperature = options.max_rounds, options.raise_temperature
    accept = accept or (lambda toks: None)
    tally = tally or Tally()
    tally.wanted = nsamples
    kept: list[Sample] = []
    stalled, rounds, first = 0, 0, 0
    if journal is not None and journal.position is not None:
        at = journal.position
        kept = resumed_samples(at.samples, accept, journal.path)
        stalled, rounds, first, strategy, temperature = (at.stalled, at.rounds, at.first,
                                                         at.strategy, at.temperature)
        tally.decoded, tally.rounds, tally.accepted = first, rounds, len(kept)
        log(f"resuming from {journal.path}: {len(kept)} accepted after {rounds} rounds "
            f"({first:,} candidates decoded)")
    while len(kept) < nsamples and (max_rounds == NO_ROUND_CAP or rounds < max_rounds):
        size = batch_size if max_rows is None else min(batch_size, max_rows - first)
        if size <= 0:
            break
        rounds += 1
        rows, scores = decode(draw_prototypes(size), strategy, temperature, first)
        first += size
        before = len(kept)
        for row, score in zip(rows, scores):
            pair = accept(_ids_to_tokens(vocab, row))
            if pair is not None:
                kept.append(Sample(pair[0], pair[1], score))
        tally.record(size, len(kept))
        stalled = stalled + 1 if len(kept) == before else 0
        if rounds % PROGRESS_ROUNDS == 0:
            cap = "no cap" if max_rounds == NO_ROUND_CAP else f"at most {max_rounds}"
            log(f"sampling: {len(kept)} of {nsamples} accepted after {rounds} rounds ({cap})")
        if raise_temperature and stalled >= patience:
            if strategy in ("greedy", "beam"):
                strategy = "mixed"
            else:
                temperature = round(temperature + 0.1, 3)
            log(f"no new samples for {patience} rounds: {strategy} sampling at T {temperature}")
            stalled = 0
        if journal is not None:   # the state the next round starts from (raised or not)
            journal.record(kept[before:], Position(rounds, first, stalled, strategy, temperature))
    report_shortfall(len(kept), n, rounds, batch_size, asked, (strategy, temperature),
                     max_rounds, raise_temperature, log,
                     exhausted=max_rows is not None and first >= max_rows)
    return (keep or most_probable)(kept, n)


def resumed_samples(samples: list, accept: Callable, source) -> list[Sample]:
    """A journal's accepted samples, given to the filter again (which then knows them:
    a later duplicate is rejected as in the uninterrupted run)."""
    kept = []
    for x, y, logprob in samples:
        if accept([*x, SEP, *y]) != (x, y):
            raise UserError(f"{source}: a sample this job's filter does not accept "
                            f"({' '.join(x)} -> {' '.join(y)}); run without --resume")
        kept.append(Sample(x, y, logprob))
    return kept


def most_probable(samples: list[Sample], n: int) -> list[Sample]:
    """The ``n`` of highest log-probability, rounded as the contract ranks
    (``rank_key``); the sort is stable, so ties keep the decoding order."""
    return sorted(samples, key=lambda s: rank_key(s.logprob))[:n]


def describe_sampler(strategy: str, temperature: float) -> str:
    """How candidates are drawn, in words: the temperature only where it is used."""
    if strategy in ("greedy", "beam"):
        return f"{strategy} search"
    return f"{strategy} sampling at T {temperature:g}"


def report_shortfall(kept: int, n: int, rounds: int, batch_size: int, asked: tuple,
                     final: tuple, max_rounds: int, raise_temperature: bool,
                     log: Callable[[str], None], exhausted: bool = False) -> None:
    """Nothing accepted: NoSamples; fewer than ``n``: a warning naming what helps.
    ``exhausted``: a deterministic decoder went once through every selected tuple."""
    sampler = describe_sampler(*asked) + (
        f", raised to {describe_sampler(*final)}" if tuple(final) != tuple(asked) else "")
    if exhausted:
        helps = ("every selected prototype tuple was decoded once, and a deterministic "
                 "decoder would only repeat them: `all_prototypes`, `strategy` mixed or "
                 "temperature, or an export with more `max_prototypes`")
    else:
        helps = f"`max_rounds` (now {max_rounds})" + (
            "" if raise_temperature else ", `raise_temperature`")
    if not kept:
        raise NoSamples(f"no sample passed the filter in {rounds} rounds of {batch_size} "
                        f"({sampler}); train the generator longer or allow more: {helps}")
    if kept < n:   # settings in backquotes: the command line logs them as its flags
        log(f"warning: {kept} of the {n} samples asked for (`n`) passed the filter in "
            f"{rounds} rounds ({sampler}); for more: {helps}")


@dataclass
class SampleRun:
    samples: list[Sample]
    seconds: float
    out: str | None
    data: str = ""  # the data set the generator was trained on
    decode_seconds: float | None = None  # of ``seconds``, spent in the decode loop
    decoded: int | None = None  # candidates decoded (rows), accepted or not
    tuples: str = ""  # which prototype tuples were decoded (exports)
    device: str | None = None  # where it ran: device (and ONNX Runtime's providers in use)
    train: pl.DataFrame | None = None  # the training pairs the filters read (exports)
    build_seconds: float = 0.0  # building the C++ runner (once per source), not in ``seconds``


def check_sig_rare(rare: str | None, table: pl.DataFrame, data: str) -> None:
    """Stop before sampling when --rare names a tag the morphology data never use (no
    sample could carry it)."""
    _, tags = sig_rare_choice(rare)
    if not tags:
        return
    known = set(table["tags"].explode().drop_nulls().to_list())
    unknown = sorted(tags - known)
    if unknown:
        raise SettingError(f"`rare` {rare}: {', '.join(unknown)} is not a tag of {data} "
                           f"(its tags: {', '.join(sorted(known))})")


def make_filter(config: dict, table: pl.DataFrame, resample: str, rare: str | None):
    """The acceptance test of the checkpoint's task (novelty: SCAN only, by default)."""
    train = table.filter(pl.col("split") == "train")
    pairs = list(zip(train["x"].to_list(), train["y"].to_list()))
    if config.get("data_snapshot") is not None:  # the user's own data
        return user_filter(config, train, pairs, resample, rare)
    task = task_of(config["data"])
    rule = None
    if resample == "rare":
        if task.scan:
            rule = contains_rule(scan_rare_phrase(task.split, rare))
        else:
            choice, tags = sig_rare_choice(rare)
            rule = rare_tag_rule(tags if tags is not None else nb.rare_tags(train, choice))
    elif resample != "none":
        raise SettingError(f"`resample` {resample}: unknown (valid: none, rare)")
    novel = bool(config.get("sample", {}).get("novel", task.scan))
    return SampleFilter.from_pairs(pairs, novel=novel, rule=rule, morphology=not task.scan)


def known_input_trie(filt: SampleFilter, vocab: Vocab, novel_inputs: bool) -> InputTrie | None:
    """The searches' ``known_inputs`` (``compgen.decoding.input_trie``) for ``filt``'s
    training inputs, as ids (None without ``novel_inputs``); a filter that keeps
    training inputs has nothing to mask."""
    if not novel_inputs:
        return None
    if not filt.novel:
        raise SettingError("`novel_inputs`: this generator's filter keeps training inputs "
                           "(its [sample] novel is off); nothing to mask")
    index = vocab.index
    return InputTrie([index.get(t, -1) for t in x] for x in sorted(filt.train_inputs))


def input_stop(filt: SampleFilter, vocab: Vocab) -> Callable:
    """The decoders' ``stop_input`` (``compgen.decoding.search.GreedySearch``) for
    ``filt``: the ids of an input ``x`` -> True when no datum with that input is kept."""
    return lambda ids: filt.rejects_input(vocab.decode(ids, strip=True))


def scan_quality(run: SampleRun, data_dir=None) -> dict | None:
    """For SCAN generators: how many samples are novel, use the split's held-out primitive
    (``jump`` for jump, else ``right``) in a command absent from training, and are correct
    SCAN pairs according to the full grammar. None for other data."""
    task = task_of(run.data)
    if not task.scan:
        return None
    # an export's run carries the training pairs it shipped: no second reading of the set
    train = run.train if run.train is not None else select_split(
        load_dataset(run.data, data_dir), "train")
    primitive = "jump" if "jump" in task.split else "right"
    report = scan_sample_report([(s.x, s.y) for s in run.samples], train,
                                load_scan_grammar(resolve_data_dir(data_dir)), primitive)
    return {**report, "primitive": primitive}
