#!/usr/bin/env python
"""Would a better search fix a SCAN generator's wrong samples? For every accepted sample
whose actions are wrong, compare the generator's log-likelihood of the actions it wrote
with that of the correct actions of the same command, given the same prototypes (test
dropout off). If the correct actions were the more probable, beam search or reranking
could recover them; if the written ones are, the error is in the model.

    .venv/bin/python scripts/analyze/scan_action_likelihood.py GENERATOR.pt [--strategy mixed -T 0.2] [--rounds 80] [--json]

Samples are drawn as ``compgen sample`` draws them (the checkpoint's sampler and Omega,
rare resampling on the held-out phrase), here with ``--rare-prototypes`` and
``--prototype-cut none`` unless told otherwise; counted by how the held-out phrase is used
(``scripts/analyze/scan_breakdown.py``).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch
from scan_breakdown import use_of

from compgen.data import load_dataset
from compgen.data.resample import scan_rare_phrase
from compgen.data.scan import load_scan_grammar
from compgen.data.sources import resolve_data_dir
from compgen.data.vocab import EOS_ID
from compgen.decoding.options import SampleOptions
from compgen.models.recombine import collate_prototypes, collate_targets
from compgen.neighborhoods.omega_source import prototype_source
from compgen.runtimes.eager import decode_batch
from compgen.sampling.collection import make_filter
from compgen.training.checkpoint import load_generator


def sequence_nll(model, ids: list[int], protos: torch.Tensor) -> float:
    """-log p(<s> ids </s> | prototypes), the exact copy marginal, no dropout."""
    with torch.no_grad():
        _, nll, _ = model.loss(collate_targets([ids], "scan", model.cfg.max_len), protos)
    return float(nll)


def compare(checkpoint: str, rounds: int, seed: int, rare_prototypes: bool,
            prototype_cut: str, strategy: str | None, temperature: float | None) -> dict:
    model, vocab, config = load_generator(checkpoint)
    split = config["data"].split("/", 1)[1]
    phrase = scan_rare_phrase(split, None)
    options = SampleOptions.resolve(config, strategy=strategy, temperature=temperature)
    data_dir = resolve_data_dir(None)
    table = load_dataset(config["data"], data_dir)
    grammar = load_scan_grammar(data_dir)
    accept = make_filter(config, table, "rare", phrase).accept
    draw = prototype_source(config, table, model.nproto, seed, "rare", phrase,
                            rare_prototypes, prototype_cut)
    sampling_dropout = model.outdrop_test  # the checkpoint's: samples are drawn with it
    rows: dict[str, dict] = {}
    seen = set()
    for r in range(rounds):
        tuples = draw(options.batch_size)
        protos = collate_prototypes([[vocab.encode(p) for p in t] for t in tuples], "scan",
                                    model.cfg.max_len)
        model.outdrop_test = sampling_dropout
        decoded = decode_batch(model, protos, options.strategy, options.temperature,
                               model.cfg.max_len, seed=seed, beam_width=options.beam_width,
                               sample_ids=r * len(tuples) + np.arange(len(tuples)))
        model.outdrop_test = False  # scored without it
        for b, ids in enumerate(decoded.tokens.tolist()):
            ids = ids[:ids.index(EOS_ID)] if EOS_ID in ids else ids
            key = tuple(ids)
            pair = accept(vocab.decode(ids))
            if pair is None or key in seen:
                continue
            seen.add(key)
            command, actions = pair
            gold = grammar.get(tuple(command))
            if gold is None:
                continue
            row = rows.setdefault(use_of(command, phrase.split()) or "(not used)",
                                  {"samples": 0, "correct": 0, "wrong": 0,
                                   "correct_more_probable": 0})
            row["samples"] += 1
            if tuple(actions) == gold:
                row["correct"] += 1
                continue
            row["wrong"] += 1
            sep = len(ids) - len(actions) - 1  # ids = command <sep> actions
            written = sequence_nll(model, ids, protos[b:b + 1])
            right = sequence_nll(model, ids[:sep + 1] + vocab.encode(list(gold)), protos[b:b + 1])
            row["correct_more_probable"] += right < written
    return {"checkpoint": checkpoint, "rounds": rounds, "seed": seed,
            "sampler": f"{options.strategy} T {options.temperature}",
            "prototypes": {"rare": rare_prototypes, "cut": prototype_cut},
            "rows": dict(sorted(rows.items()))}


def markdown(result: dict) -> str:
    lines = [f"{result['checkpoint']}: {result['sampler']}, {result['rounds']} rounds",
             "", ("| use in the command | accepted samples | correct | wrong | wrong, but "
                  "the correct actions are more probable |"), "|---|---:|---:|---:|---:|"]
    for use, r in result["rows"].items():
        lines.append(f"| {use} | {r['samples']} | {r['correct']} | {r['wrong']} | "
                     f"{r['correct_more_probable']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoint", help="a SCAN generator with prototypes")
    parser.add_argument("--rounds", type=int, default=80, help="batches of prototype tuples")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--all-prototypes", action="store_true",
                        help="Omega as the reference (default: --rare-prototypes)")
    parser.add_argument("--prototype-cut", default="none", choices=("mean", "mean+std", "none"))
    parser.add_argument("--strategy", help="default: the checkpoint's sampler")
    parser.add_argument("-T", "--temperature", type=float, help="default: the checkpoint's")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    start = time.perf_counter()
    result = compare(args.checkpoint, args.rounds, args.seed, not args.all_prototypes,
                     args.prototype_cut, args.strategy, args.temperature)
    result["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(result, indent=1) if args.json else
          markdown(result) + f"\n\n{result['seconds']} s, {args.threads} thread(s)")


if __name__ == "__main__":
    main()
