"""LM reranking on SCAN jump: the share of correct SCAN pairs among the N kept samples
without and with n-gram reranking, the LM's weight, side and rerank rule chosen on a
validation set that mirrors the jump split.

    .venv/bin/python scripts/analyze/lm_rerank_scan.py [--export exported/scan-jump-recomb2]
        [--n 400] [--nsamples 1000] [--strategy beam] [--work runs/lm-rerank] [--json FILE]

1. LMs (5-gram, ``lmplz --discount_fallback``) per side (``y``, ``x <sep> y``): a base
   model on the training pairs (the export's, the same as scan/jump's) and an augmented
   one on the training pairs plus every pair GECA synthesizes from them (scan preset,
   all variants, no sample limit; ``train_pair_lms`` names the commands).
2. The sampler's candidates: one ONNX Runtime run (one thread, seed 0) decodes as
   ``compgen sample`` does; every candidate it accepts is kept in decoding order, and
   every decoded row is kept for step 3.
3. Validation without the grammar: the jump split holds out a primitive's uses in
   context, so the same is done with each other primitive p (walk, run, look). The LMs
   are trained again (same recipe) on the training pairs without p in context; the
   candidates the same filter accepts as novel against those pairs whose input is a
   training input are labelled by the training output. Every setting (side, mixture
   weight of the augmented model, ``--rerank lm|sum``) keeps the same share of them as
   N is of the candidates; the setting with the highest mean share correct is chosen.
   (The generator saw these commands in training, so its own score is stronger there
   than on novel commands: the validation chooses among LM settings, and the test says
   whether the LM helps.)
4. Test: the share of correct SCAN pairs (``scan/tasks.txt``) among the N kept by the
   generator's score and by every LM setting, through ``LmRanking.keep`` (what
   ``compgen sample --lm`` keeps); the chosen setting's ``compgen sample`` command.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from _harness import ROOT, cpu_flags

CPU_FLAGS = ("avx2", "avx512f", "amx_bf16", "avx512_bf16")
WEIGHTS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
SIDES = ("y", "xy")
PRIMITIVES = ("walk", "run", "look")


def train_pair_lms(data: str, folder: Path) -> dict:
    """{side: (base model, augmented model)} for the pairs of ``data`` (a data set or
    file), as these commands train them:

        compgen lm train DATA --side SIDE -o base-SIDE.bin --discount-fallback
        compgen augment geca DATA --preset scan --variants all --n-sample all \\
            --no-reference-split --concat -o geca-all.tsv
        compgen lm train geca-all.tsv --side SIDE -o aug-SIDE.bin --discount-fallback
    """
    from compgen.augment.geca import augment_file, make_config
    from compgen.lm.kenlm_tools import train_lm
    from compgen.lm.side_corpus import write_side_corpus

    folder.mkdir(parents=True, exist_ok=True)
    config = replace(make_config("scan", None, data, reference_split=False), variants=None,
                     n_sample=None)
    augmented = folder / "geca-all.tsv"
    result = augment_file(data, augmented, config, concat=True)
    models = {"geca_pairs": int(result.table.height)}
    for side in SIDES:
        for name, corpus in (("base", data), ("aug", str(augmented))):
            text = folder / f"{name}-{side}.txt"
            write_side_corpus(corpus, side, text)
            train_lm(text, folder / f"{name}-{side}.bin", 5, discount_fallback=True)
            text.unlink()
        models[side] = (folder / f"base-{side}.bin", folder / f"aug-{side}.bin")
    return models


def decode_candidates(export: Path, args):
    """(accepted candidates in decoding order, every decoded (tokens, logprob) row)."""
    from compgen.data.vocab import Vocab
    from compgen.decoding.options import SampleOptions
    from compgen.runtimes.artifact import load_manifest
    from compgen.sampling.collection import collect_decoded, make_filter
    from compgen.sampling.run import ExportDecoder, PrototypeCycle, shipped_training_table
    from compgen.sampling.tuple_selection import TupleSelection

    manifest = load_manifest(export)
    options = SampleOptions.resolve(manifest.config, n=args.n, nsamples=args.nsamples,
                                    strategy=args.strategy, seed=0, threads=1)
    vocab = Vocab.load(export / "vocab.json")
    decode = ExportDecoder(export, manifest, "onnx", options)
    rows = []

    def recording(idx, strategy, temperature, first):
        tokens, scores = decode(idx, strategy, temperature, first)
        rows.extend((vocab.decode(t, strip=True), s) for t, s in zip(tokens, scores))
        return tokens, scores

    filt = make_filter(manifest.config, shipped_training_table(export), options.resample,
                       options.rare)
    stored = manifest.prototypes   # every stored tuple, in order
    accepted = collect_decoded(recording, vocab,
                               PrototypeCycle(TupleSelection(np.arange(stored), stored)),
                               replace(options, n=options.nsamples), filt.accept,
                               log=lambda m: None,
                               keep=lambda samples, n: samples)   # all, in decoding order
    return accepted, rows, options


def validation_candidates(rows, train_pairs, primitive: str):
    """Training pairs without ``primitive`` in context (its uses alone stay, as the jump
    split keeps "jump"), and the decoded rows a novel-filter against them accepts whose
    input is a training input, labelled by its output."""
    from compgen.data.resample import SampleFilter
    from compgen.sampling.collection import Sample

    truth = {tuple(x): tuple(y) for x, y in train_pairs}
    pseudo = [(x, y) for x, y in train_pairs if primitive not in x or list(x) == [primitive]]
    filt = SampleFilter.from_pairs(pseudo, novel=True)
    candidates, labels = [], []
    for tokens, score in rows:
        pair = filt.accept(tokens)
        if pair is not None and tuple(pair[0]) in truth:
            candidates.append(Sample(pair[0], pair[1], score))
            labels.append(truth[tuple(pair[0])] == tuple(pair[1]))
    return pseudo, candidates, labels


def kept_share(candidates, labels, k: int, ranking=None) -> float:
    """Share correct among the k kept (by the generator's score without ``ranking``)."""
    from compgen.sampling.collection import Sample, most_probable

    copies = [Sample(c.x, c.y, c.logprob) for c in candidates]
    index = {id(c): i for i, c in enumerate(copies)}
    kept = ranking.keep(copies, k) if ranking else most_probable(copies, k)
    return sum(labels[index[id(c)]] for c in kept) / max(len(kept), 1)


def settings_shares(candidates, labels, k: int, models: dict) -> dict:
    """{(side, weight, rerank): share correct among the k kept} for every LM setting."""
    from compgen.lm.rerank import LmRanking
    from compgen.lm.scorer import NgramScorer

    shares = {}
    for side in SIDES:
        scorer = NgramScorer(*models[side], mix="token", weight=0.0)
        for weight in WEIGHTS:
            scorer.set_weight(weight)
            for rerank in ("lm", "sum"):
                shares[(side, weight, rerank)] = kept_share(
                    candidates, labels, k, LmRanking(scorer, side, rerank))
    return shares


def main() -> None:
    from compgen.data.scan import load_scan_grammar
    from compgen.data.sources import resolve_data_dir
    from compgen.io import write_samples_tsv
    from compgen.runtimes.artifact import TRAINING_PAIRS
    from compgen.sampling.run import shipped_training_table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--export", type=Path, default=ROOT / "exported" / "scan-jump-recomb2")
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--nsamples", type=int, default=1000)
    parser.add_argument("--strategy", default="beam")
    parser.add_argument("--work", type=Path, default=ROOT / "runs" / "lm-rerank")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args()
    started, load = time.perf_counter(), os.getloadavg()[0]

    table = shipped_training_table(args.export)
    train_pairs = list(zip(table["x"].to_list(), table["y"].to_list()))
    accepted, rows, options = decode_candidates(args.export, args)
    grammar = load_scan_grammar(resolve_data_dir(args.data_dir))
    test_labels = [grammar.get(tuple(s.x)) == tuple(s.y) for s in accepted]
    ratio = min(1.0, args.n / len(accepted))

    validation = {}
    for primitive in PRIMITIVES:
        pseudo, candidates, labels = validation_candidates(rows, train_pairs, primitive)
        folder = args.work / f"without-{primitive}"
        folder.mkdir(parents=True, exist_ok=True)
        write_samples_tsv(folder / "train.tsv", pseudo)
        models = train_pair_lms(str(folder / "train.tsv"), folder)
        k = max(1, round(ratio * len(candidates)))
        validation[primitive] = {"candidates": len(candidates), "correct": sum(labels),
                                 "kept": k, "model": kept_share(candidates, labels, k),
                                 "settings": settings_shares(candidates, labels, k, models)}
    final = train_pair_lms(str(args.export / TRAINING_PAIRS), args.work / "final")
    test = settings_shares(accepted, test_labels, args.n, final)
    test_model = kept_share(accepted, test_labels, args.n)

    def mean_validation(key):
        return sum(v["settings"][key] for v in validation.values()) / len(validation)

    chosen = max(test, key=mean_validation)   # first in grid order on a tie
    side, weight, rerank = chosen
    command = (f"compgen sample {args.export} --n {args.n} --nsamples {args.nsamples} "
               f"--strategy {args.strategy} --seed 0 --threads 1 --lm "
               f"{final[side][0]},{final[side][1]} --lm-weight {weight:g} --lm-side {side} "
               f"--rerank {rerank} -o samples.tsv")
    print(f"{len(accepted)} candidates ({sum(test_labels)} correct), {args.n} kept; GECA pairs "
          f"for the final LMs: {final['geca_pairs']}; validation candidates "
          + ", ".join(f"{p} {v['candidates']} ({v['correct']} correct)" for p, v in validation.items()))
    print("\n| kept by | " + " | ".join(f"val. {p}" for p in PRIMITIVES)
          + " | val. mean | test: correct among kept |\n|---|" + "---:|" * (len(PRIMITIVES) + 2))
    model_val = [validation[p]["model"] for p in PRIMITIVES]
    print("| generator log-probability | " + " | ".join(f"{v:.1%}" for v in model_val)
          + f" | {sum(model_val) / len(model_val):.1%} | {test_model:.1%} |")
    for key in sorted(test, key=lambda k: (k[0], k[2], k[1])):
        mark = " **chosen**" if key == chosen else ""
        print(f"| {key[0]}, weight {key[1]:g}, --rerank {key[2]}{mark} | "
              + " | ".join(f"{validation[p]['settings'][key]:.1%}" for p in PRIMITIVES)
              + f" | {mean_validation(key):.1%} | {test[key]:.1%} |")
    print(f"\nchosen: {command}\nCPU flags: {cpu_flags(CPU_FLAGS)}; load average {load:.1f} -> "
          f"{os.getloadavg()[0]:.1f}; {time.perf_counter() - started:.0f} s")
    if args.json:
        def keyed(shares):
            return {f"{s}|{w:g}|{r}": v for (s, w, r), v in shares.items()}
        report = {"export": str(args.export), "n": args.n, "nsamples": args.nsamples,
                  "strategy": args.strategy, "candidates": len(accepted),
                  "candidates_correct": sum(test_labels), "geca_pairs": final["geca_pairs"],
                  "test_model": test_model, "test": keyed(test),
                  "validation": {p: {**v, "settings": keyed(v["settings"])}
                                 for p, v in validation.items()},
                  "chosen": {"side": side, "weight": weight, "rerank": rerank,
                             "test": test[chosen], "command": command},
                  "cpu_flags": cpu_flags(CPU_FLAGS), "load_average": load,
                  "python": platform.python_version(), "options": asdict(options)}
        args.json.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
