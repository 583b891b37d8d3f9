"""Direct inference (paper App. E, spec §7.2): a recomb-2 SCAN generator used as the
predictor itself, with no conditional model.

For every unique test input u:

1. ``prototype_pairs`` retrieves up to 5 x 5 prototype pairs from the training data.
   First prototypes n: training inputs with ``0.5 < sim(u, u_n) < 1`` that lack at least
   one token of u (``setdiff(u, u_n)`` non-empty), the 5 most similar (none: one random
   training datum). For each, ``d = setdiff(u, u_n)``; second prototypes l != n: training
   inputs with ``sim(d, u_l) > 0.5`` and ``| |u_l| - |d| | < 5``, the 5 most similar
   (none: one random training datum). Prototypes are whole data ``input <sep> output``.
2. ``forced_greedy`` decodes with every pair: the input is forced to ``u <sep>``, the
   output is greedy. Each distinct output is a candidate.
3. ``output_nll`` rescores every candidate y with every pair of u: the NLL of the output
   part only (y and its </s>), combined as ``s(y) = -log sum_pairs exp(-NLL)``.
4. The prediction is the candidate with the smallest s.

Both model passes are batched over (pair) and (candidate, pair) rows; every prototype
pair of a batch is encoded once.

Choices where the spec leaves room, and where it departs from the reference code
(``evalgen.jl``: ``pickprotos_conditional`` and ``condeval``):

* Similarity is the spec's §2.1 one, ``sim(a, b) = 1 - lev(a, b) / max(|a|, |b|)`` over
  token sequences, always against training *inputs* (u with u_n, d with u_l). The
  thresholds are tested exactly on integer distances (``2 lev < max``).
* "Top 5 by similarity" is a stable sort: ties go to the earlier training datum. The
  training data are the unique (input, output) pairs of the train split in file order
  (the reference walks the raw file, where ``jump -> I_JUMP`` appears 1 467 times, so
  its top 5 can hold one datum five times).
* ``setdiff`` compares inputs, as the spec says. The reference code compares the test
  *output* with training inputs; that set is never empty and d then holds action tokens,
  so its second prototypes nearly always fall back to a random datum. Not reproduced.
* Random fallbacks come from a numpy generator seeded with ``seed``. Torch is seeded too:
  the scan generator keeps dropout on its decoder state at test time (``outdrop_test``),
  so decoding and rescoring are stochastic, as in the reference.
* Decoding takes at most ``max_len`` (45) steps, the forced input included, as in the
  reference. A candidate without </s> by then can never be an exact or top-3 match (the
  reference compares with the reference output + </s>); it is still rescored, as
  ``u <sep> y </s>``.
* Metrics: exact and top-3 match compare outputs together with their end; micro F1
  (``scoring.micro_f1``) is over action tokens, as for the predictor, so the rows sit in
  the same results tables (the reference also counts </s> as one F1 unit).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein
from torch import Tensor

from compgen.data.dataset import Dataset, open_dataset
from compgen.data.task import task_of
from compgen.data.vocab import EOS_ID, PAD_ID, SEP_ID
from compgen.decoding.contract import LATER_STEPS_MASKED, StepRules
from compgen.decoding.samplers import ForcedPrefix
from compgen.decoding.search import GreedySearch
from compgen.decoding.teacher_forcing import teacher_forced_logp
from compgen.errors import SettingError, UserError
from compgen.io import atomic_open
from compgen.models.metrics import exact_match, micro_f1
from compgen.models.recombine import Memory, State, collate_prototypes, collate_targets, pad_2d
from compgen.runtimes.eager import EagerStepper
from compgen.training.checkpoint import load_generator

LABEL = "direct inference"
TOP_K = 5           # first prototypes per input, second prototypes per first prototype
MAX_LENGTH_GAP = 5  # second prototypes: | |u_l| - |d| | < 5
BLOCK = 256         # test inputs per all-pairs distance block
END = "</s>"        # end marker added to outputs for exact / top-3 match


# ------------------------------------------------------------------ prototype retrieval

def setdiff(a: Sequence[str], b: Sequence[str]) -> list[str]:
    """Distinct tokens of ``a`` absent from ``b``, in order of first occurrence in ``a``."""
    missing = set(a) - set(b)
    return [t for t in dict.fromkeys(a) if t in missing]


class _Strings:
    """Token sequences as strings of one character per token type, for rapidfuzz."""

    def __init__(self):
        self.index: dict[str, int] = {}

    def encode(self, tokens: Sequence[str]) -> str:
        return "".join(chr(0x100 + self.index.setdefault(t, len(self.index))) for t in tokens)


def _similar(queries: list[str], train: list[str], train_len: np.ndarray):
    """Levenshtein distances, the test ``sim > 0.5`` (the threshold of both stages) and
    sim itself, each (queries x train)."""
    query_len = np.array([len(q) for q in queries], dtype=np.int64)
    longest = np.maximum(query_len[:, None], train_len[None, :])
    # distances above the cutoff cannot pass 2 * lev < max; rapidfuzz stops early there
    cutoff = int(max(train_len.max(), query_len.max(initial=0)) // 2)
    dist = process.cdist(queries, train, scorer=Levenshtein.distance, dtype=np.int64,
                         score_cutoff=cutoff, workers=1)
    close = 2 * dist < longest  # sim > 0.5, exactly, on integers
    sim = 1.0 - dist / np.maximum(longest, 1)
    return dist, close, sim, query_len


def _most_similar(ok: np.ndarray, sim: np.ndarray, k: int) -> list[list[int]]:
    """Per row: the columns with ``ok``, the k most similar first; ties by column order."""
    order = np.argsort(np.where(ok, -sim, np.inf), axis=1, kind="stable")[:, :k]
    return [[int(j) for j in row if ok[r, j]] for r, row in enumerate(order)]


def prototype_pairs(queries: Sequence[Sequence[str]], train_inputs: Sequence[Sequence[str]],
                    seed: int = 0, k: int = TOP_K) -> list[list[tuple[int, int]]]:
    """For each query input u, its prototype pairs ``(n, l)`` as indices into
    ``train_inputs`` (module doc, step 1); never empty."""
    rng = np.random.default_rng(seed)
    strings = _Strings()
    train = [strings.encode(t) for t in train_inputs]
    train_len = np.array([len(t) for t in train], dtype=np.int64)
    # which token types each training input holds: setdiff(u, u_j) is empty iff u_j
    # holds every token type of u
    n_types = len(strings.index)
    has = np.zeros((len(train), n_types), dtype=bool)
    for j, s in enumerate(train):
        has[j, [ord(c) - 0x100 for c in s]] = True

    def lacks_a_token_of(query: str) -> np.ndarray:
        types = [ord(c) - 0x100 for c in set(query)]
        if any(t >= n_types for t in types):  # a token no training input has
            return np.ones(len(train), dtype=bool)
        return ~has[:, types].all(1)

    out: list[list[tuple[int, int]]] = []
    for start in range(0, len(queries), BLOCK):
        block = [list(q) for q in queries[start:start + BLOCK]]
        encoded = [strings.encode(q) for q in block]
        dist, close, sim, _ = _similar(encoded, train, train_len)
        lacks = np.stack([lacks_a_token_of(q) for q in encoded])
        firsts = _most_similar(close & (dist > 0) & lacks, sim, k)
        firsts = [f or [int(rng.integers(len(train)))] for f in firsts]

        # second stage: one distance row per distinct difference string d
        diffs = {(r, n): strings.encode(setdiff(block[r], train_inputs[n]))
                 for r, f in enumerate(firsts) for n in f}
        distinct = list(dict.fromkeys(diffs.values()))
        row_of = {d: i for i, d in enumerate(distinct)}
        _, close_d, sim_d, d_len = _similar(distinct, train, train_len)
        near = close_d & (np.abs(train_len[None, :] - d_len[:, None]) < MAX_LENGTH_GAP)
        seconds = _most_similar(near, sim_d, k)
        for r, first in enumerate(firsts):
            pairs = []
            for n in first:
                # l != n as the spec states it; it never binds: d and u_n share no token,
                # so sim(d, u_n) = 0
                chosen = [l for l in seconds[row_of[diffs[r, n]]] if l != n]
                chosen = chosen or [int(rng.integers(len(train)))]
                pairs += [(n, l) for l in chosen]
            out.append(pairs)
    return out


# ------------------------------------------------------------------ the two model passes

def _encode_pairs(model, protos: Tensor, rows: Tensor, steps: int) -> tuple[Memory, State]:
    """Encode each distinct prototype pair ``protos`` ``(U, 2, T)`` once, then give every
    row the encoding of its pair ``rows`` ``(B,)``."""
    memory, state = model.encode(protos, model.prior_z(protos.size(0)), steps)
    return (Memory(*[t.index_select(0, rows) for t in memory]),
            State(*[t.index_select(0, rows) for t in state]))


def forced_greedy(model, memory: Memory, state: State, prefix: Tensor,
                  max_steps: int) -> tuple[Tensor, Tensor]:
    """Decode every row with its first tokens forced to ``prefix`` ``(B, P)`` (padded with
    <pad>), greedily afterwards (the decoding core's greedy search with a forced-prefix
    sampler). Returns the tokens ``(B, steps)`` (<pad> after </s>) and whether each row
    ended with </s>."""
    prefix = prefix.numpy()
    sampler = ForcedPrefix(prefix, (prefix != PAD_ID).sum(1))
    # every step masks as a later one: the first free step follows <sep>
    rules = StepRules(model.vocab_size, first_step_masked=LATER_STEPS_MASKED)
    stepper = EagerStepper(model, max_steps).started(memory, state)
    tokens, _ = GreedySearch(sampler, compact=False).best(stepper, rules, len(prefix), max_steps)
    return torch.from_numpy(tokens), torch.from_numpy((tokens == EOS_ID).any(1))


@torch.no_grad()
def output_nll(model, memory: Memory, state: State, targets: Tensor,
               score_from: Tensor) -> Tensor:
    """Teacher-forced NLL ``(B,)`` of ``targets`` ``(B, T)`` (``<s> u <sep> y </s>``,
    padded), summed over the predicted positions from ``score_from`` on (the index of
    y's first token in ``targets[:, 1:]``, i.e. ``|u| + 1``); copying is marginalised by
    ``decode_step``, exactly as in ``Recombine.loss``."""
    gold = targets[:, 1:]
    positions = torch.arange(gold.size(1))[None, :]
    counted = (positions >= score_from[:, None]) & (gold != PAD_ID)
    logp = torch.from_numpy(teacher_forced_logp(
        lambda token, state: model.decode_step(token, state, memory), targets, state))
    nll = -logp.gather(2, gold[..., None])[..., 0]
    return torch.where(counted, nll, torch.zeros_like(nll)).sum(1)


# ------------------------------------------------------------------ direct inference

@dataclass
class Candidate:
    output: tuple[str, ...]
    finished: bool  # ended with </s> within the step limit
    score: float = float("inf")  # s(y) = -log sum_pairs exp(-NLL)

    def ended(self) -> list[str]:
        """The output with its end marker, as exact match compares it."""
        return list(self.output) + ([END] if self.finished else [])


@dataclass
class DirectResult:
    source: list[str]
    reference: list[str]
    pairs: list[tuple[int, int]]
    candidates: list[Candidate] = field(default_factory=list)  # best (lowest s) first

    @property
    def prediction(self) -> Candidate:
        return self.candidates[0]


def _batches(n: int, size: int):
    for start in range(0, n, size):
        yield range(start, min(start + size, n))


def _pair_batch(rows: Sequence[tuple[int, int]], data_ids: Sequence[Sequence[int]], max_len: int):
    """Distinct pairs of ``rows`` as a prototype tensor and each row's index into it."""
    distinct = list(dict.fromkeys(rows))
    index = {p: i for i, p in enumerate(distinct)}
    protos = collate_prototypes([[data_ids[n], data_ids[l]] for n, l in distinct], "scan", max_len)
    return protos, torch.tensor([index[p] for p in rows], dtype=torch.long)


def direct_inference(model, vocab, train: Sequence[tuple[list[str], list[str]]],
                     tests: Sequence[tuple[list[str], list[str]]], seed: int = 0,
                     batch_size: int = 256, group: int = 64,
                     log: Callable[[str], None] | None = None) -> list[DirectResult]:
    """Direct inference (module doc) for ``tests`` (input, reference output) with the
    prototypes drawn from ``train`` (unique (input, output) pairs). Test inputs are
    decoded and rescored ``group`` at a time, which bounds the memory."""
    data_ids = [vocab.encode(list(x) + ["<sep>"] + list(y)) for x, y in train]
    pairs = prototype_pairs([u for u, _ in tests], [x for x, _ in train], seed)
    results = [DirectResult(list(u), list(ref), p) for (u, ref), p in zip(tests, pairs)]
    for start in range(0, len(results), group):
        _decode_and_rescore(model, vocab, data_ids, results[start:start + group], batch_size)
        if log:
            log(f"direct inference: {min(start + group, len(results))}/{len(results)} inputs")
    return results


def _decode_and_rescore(model, vocab, data_ids: Sequence[Sequence[int]],
                        results: Sequence[DirectResult], batch_size: int) -> None:
    """Steps 2-4 of the module doc for some inputs: fills each result's candidates."""
    max_len = model.cfg.max_len
    source_ids = [vocab.encode(r.source) for r in results]

    # decode: one row per (test input, pair), the input forced
    rows = [(q, pair) for q, result in enumerate(results) for pair in result.pairs]
    found: list[dict[tuple, Candidate]] = [{} for _ in results]
    for chunk in _batches(len(rows), batch_size):
        queries = [rows[i][0] for i in chunk]
        protos, index = _pair_batch([rows[i][1] for i in chunk], data_ids, max_len)
        memory, state = _encode_pairs(model, protos, index, max_len)
        prefix = pad_2d([source_ids[q] + [SEP_ID] for q in queries])
        tokens, ended = forced_greedy(model, memory, state, prefix, max_len)
        for q, row, finished in zip(queries, tokens.tolist(), ended.tolist()):
            output = tuple(vocab.decode(row[len(source_ids[q]) + 1:], strip=True))
            found[q].setdefault((output, finished), Candidate(output, finished))
    candidates = [list(f.values()) for f in found]

    # rescore: one row per (test input, candidate, pair); similar lengths share a batch
    scored = [(q, c, pair) for q, result in enumerate(results)
              for c in range(len(candidates[q])) for pair in result.pairs]
    targets = [source_ids[q] + [SEP_ID] + vocab.encode(candidates[q][c].output)
               for q, c, _ in scored]
    order = sorted(range(len(scored)), key=lambda i: len(targets[i]))
    nll = torch.zeros(len(scored))
    for chunk in _batches(len(order), batch_size):
        picked = torch.tensor([order[i] for i in chunk])
        protos, index = _pair_batch([scored[i][2] for i in picked.tolist()], data_ids, max_len)
        batch = collate_targets([targets[i] for i in picked.tolist()], "scan", max_len)
        memory, state = _encode_pairs(model, protos, index, batch.size(1))
        score_from = torch.tensor([len(source_ids[scored[i][0]]) + 1 for i in picked.tolist()])
        nll[picked] = output_nll(model, memory, state, batch, score_from)

    # s(y) = -logsumexp(-NLL) over the pairs of the input; best candidate first. The
    # rows of ``scored`` are input-major, then candidate, then pair: one slice each
    start = 0
    for q, result in enumerate(results):
        for candidate in candidates[q]:
            negated = -nll[start:start + len(result.pairs)]
            candidate.score = -float(torch.logsumexp(negated, 0))
            start += len(result.pairs)
        result.candidates = sorted(candidates[q], key=lambda cand: cand.score)  # stable


def direct_metrics(results: Sequence[DirectResult], k: int = 3) -> dict:
    """Exact match, top-k match (the reference among the k best candidates; k = 3 as the
    reference) and micro F1 over action tokens."""
    refs = [r.reference + [END] for r in results]
    top_k = [any(c.ended() == ref for c in r.candidates[:k]) for r, ref in zip(results, refs)]
    return {"n": len(results),
            "exact_match": exact_match([r.prediction.ended() for r in results], refs),
            f"top{k}_match": sum(top_k) / len(results) if results else float("nan"),
            "f1": micro_f1([list(r.prediction.output) for r in results],
                           [r.reference for r in results])}


def unique_pairs(table, split: str) -> list[tuple[list[str], list[str]]]:
    """Distinct (input, output) pairs of one split, in file order."""
    part = table.filter(table["split"] == split)
    seen = dict.fromkeys((tuple(x), tuple(y)) for x, y in zip(part["x"].to_list(), part["y"].to_list()))
    return [(list(x), list(y)) for x, y in seen]


def evaluate_direct(checkpoint: str | Path, data: Dataset | str | None = None, data_dir=None,
                    limit: int | None = None, batch_size: int = 256, seed: int = 0,
                    predictions: str | Path | None = None,
                    log: Callable[[str], None] | None = None) -> list[dict]:
    """Direct inference of a recomb-2 SCAN generator checkpoint on the unique test inputs
    (the first ``limit`` of them): one result row like ``evaluate_predictor``'s (model,
    label, data, seed, set, subset, n, exact_match, f1) plus ``top3_match``."""
    model, vocab, config = load_generator(checkpoint)
    if not (model.scan and model.nproto == 2):
        raise UserError(f"{checkpoint}: direct inference needs a SCAN generator with 2 "
                        f"prototypes (this one: {config['model'].get('variant')}, "
                        f"{model.nproto} prototypes)")
    dataset = data or config["data"]   # a Dataset, or a name read here
    data = dataset.name if isinstance(dataset, Dataset) else dataset
    if not task_of(data).scan:
        raise SettingError(f"`data` {data}: direct inference runs on SCAN (scan/<split>)")
    table = open_dataset(dataset, data_dir).table
    train = unique_pairs(table, "train")
    by_input: dict[tuple, tuple[list[str], list[str]]] = {}
    for u, y in unique_pairs(table, "test"):  # SCAN inputs determine their outputs
        by_input.setdefault(tuple(u), (u, y))
    tests = list(by_input.values())[:limit]
    if not tests:
        raise UserError(f"{data}: no test inputs")
    torch.manual_seed(seed)
    start = time.perf_counter()
    results = direct_inference(model, vocab, train, tests, seed, batch_size, log=log)
    seconds = time.perf_counter() - start
    metrics = direct_metrics(results)
    if log:
        log(f"direct inference: {len(results)} test inputs, "
            f"{sum(len(r.pairs) for r in results)} prototype pairs, "
            f"{sum(len(r.candidates) for r in results)} candidates in {seconds:.1f} s; "
            f"exact match {metrics['exact_match']:.4f}, top-3 {metrics['top3_match']:.4f}, "
            f"F1 {metrics['f1']:.4f}")
    if predictions:
        lines = ["#set\tsource\treference\tprediction\tcorrect\tfinished\tcandidates\tpairs"]
        lines += [f"test\t{' '.join(r.source)}\t{' '.join(r.reference)}\t"
                  f"{' '.join(r.prediction.output)}\t"
                  f"{int(r.prediction.ended() == r.reference + [END])}\t"
                  f"{int(r.prediction.finished)}\t{len(r.candidates)}\t{len(r.pairs)}"
                  for r in results]
        with atomic_open(predictions, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return [{"model": Path(checkpoint).stem, "label": LABEL, "data": data,
             "seed": config.get("train", {}).get("seed"), "set": "test", "subset": "all",
             **metrics}]
