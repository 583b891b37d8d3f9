#!/usr/bin/env python
"""Benchmark STEM-CORRUPT: the CRP aligner on one 100-pair train-low file (compiled, and
interpreted with numba's JIT disabled, side by side) and a pool of 10,000, against the
budgets (aligner < 5 s, pool < 60 s). Each case runs in its own subprocess.

    .venv/bin/python scripts/bench/bench_stem_corrupt.py [--lang georgian] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from _harness import ROOT, cpu_flags, tree_env

DATA = Path(os.environ.get("COMPGEN_DATA", ROOT.parent / "shared" / "data"))
BUDGET = {"align_100": 5.0, "pool_10000": 60.0}


CPU_FLAGS = ("avx", "avx2", "avx512f", "fma", "sse4_2")


def child(case: str, lang: str) -> None:
    from compgen.augment.stem_corrupt import (
        CrpAligner,
        StemCorruptConfig,
        read_triples,
        stem_corrupt_pool,
    )

    triples = read_triples(DATA / "sigmorphon2018" / f"{lang}-train-low")
    if case == "train_update":
        print(json.dumps(_train_update(triples, lang)))
        return
    pairs = [(lemma, form) for lemma, form, _ in triples]
    start = time.perf_counter()
    CrpAligner(seed=0).align(pairs[:2])   # compile (or load the cached kernels)
    warm = time.perf_counter() - start
    if case == "align_100":
        start = time.perf_counter()
        CrpAligner(seed=0).align(pairs)
    else:
        start = time.perf_counter()
        stem_corrupt_pool(triples, StemCorruptConfig(pool_size=10_000, seed=0))
    print(json.dumps({"seconds": time.perf_counter() - start, "warm_up": warm, "pairs": len(pairs)}))


def _train_update(triples, lang: str) -> dict:
    """CPU seconds of one update (batch 16, the paper's model) and of one dev-loss pass."""
    import torch

    from compgen.augment.stem_corrupt import read_triples
    from compgen.models.inflection import (
        CharVocab,
        InflectionConfig,
        InflectionTransformer,
        pad_batch,
        source_tokens,
    )
    from compgen.training.inflection import _loss, dev_loss

    torch.set_num_threads(1)
    src_vocab = CharVocab.build(source_tokens(a, t) for a, _, t in triples)
    tgt_vocab = CharVocab.build(list(f) for _, f, _ in triples)
    net = InflectionTransformer(InflectionConfig(), len(src_vocab), len(tgt_vocab)).train()
    src = [src_vocab.encode(source_tokens(a, t)) for a, _, t in triples]
    tgt = [tgt_vocab.encode(list(f)) for _, f, _ in triples]
    opt = torch.optim.Adam(net.parameters())
    start = time.process_time()
    for i in range(20):
        idx = [(i * 16 + j) % len(src) for j in range(16)]
        loss, n = _loss(net, pad_batch([src[j] for j in idx]), [tgt[j] for j in idx], 0.2)
        opt.zero_grad()
        (loss / n).backward()
        opt.step()
    update = (time.process_time() - start) / 20
    dev = read_triples(DATA / "sigmorphon2018" / f"{lang}-dev")
    start = time.process_time()
    dev_loss(net, [src_vocab.encode(source_tokens(a, t)) for a, _, t in dev],
             [tgt_vocab.encode(list(f)) for _, f, _ in dev], 0.2)
    return {"update_cpu_seconds": update, "dev_loss_cpu_seconds": time.process_time() - start,
            "dev_rows": len(dev)}


def run(case: str, lang: str, jit: bool = True) -> dict:
    env = tree_env(ROOT, OMP_NUM_THREADS="1")
    if not jit:
        env["NUMBA_DISABLE_JIT"] = "1"
    start = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--child", case, "--lang", lang], env=env,
                         capture_output=True, text=True, check=True).stdout
    stats = json.loads(out.strip().splitlines()[-1])
    stats["process_wall"] = time.perf_counter() - start
    return stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--lang", default="georgian")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child")
    args = parser.parse_args()
    if args.child:
        child(args.child, args.lang)
        return
    compiled = {case: run(case, args.lang) for case in BUDGET}
    interpreted = run("align_100", args.lang, jit=False)
    train = run("train_update", args.lang)
    epochs_100 = 6000 / -(-100 // 16)   # fairseq validates after every epoch of the gold rows
    result = {
        "lang": args.lang, "cpu_flags": cpu_flags(CPU_FLAGS), "python": platform.python_version(),
        "align_100_seconds": compiled["align_100"]["seconds"],
        "align_100_interpreted_seconds": interpreted["seconds"],
        "speedup_compiled_vs_interpreted": interpreted["seconds"] / compiled["align_100"]["seconds"],
        "pool_10000_seconds": compiled["pool_10000"]["seconds"],
        "compile_or_cache_load_seconds": compiled["align_100"]["warm_up"],
        "align_100_share_of_budget": compiled["align_100"]["seconds"] / BUDGET["align_100"],
        "pool_10000_share_of_budget": compiled["pool_10000"]["seconds"] / BUDGET["pool_10000"],
        "train_update_cpu_seconds": train["update_cpu_seconds"],
        "dev_loss_cpu_seconds": train["dev_loss_cpu_seconds"],
        "train_6000_updates_cpu_minutes": train["update_cpu_seconds"] * 6000 / 60,
        "validation_every_epoch_cpu_minutes_gold_only": epochs_100 * train["dev_loss_cpu_seconds"] / 60,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"STEM-CORRUPT on {args.lang} (CPU flags: {result['cpu_flags']})")
    print("| case | seconds | budget | share of budget |")
    print("|---|---:|---:|---:|")
    print(f"| aligner, 100 pairs (compiled) | {result['align_100_seconds']:.4f} | 5 | "
          f"{result['align_100_share_of_budget']:.4f} |")
    print(f"| aligner, 100 pairs (interpreted) | {result['align_100_interpreted_seconds']:.2f} | 5 | "
          f"{result['align_100_interpreted_seconds'] / 5:.2f} |")
    print(f"| pool of 10,000 | {result['pool_10000_seconds']:.2f} | 60 | "
          f"{result['pool_10000_share_of_budget']:.4f} |")
    print(f"compiled / interpreted speed-up: {result['speedup_compiled_vs_interpreted']:.0f}x")
    print(f"inflection model: {result['train_update_cpu_seconds']:.3f} CPU-s per update, "
          f"6000 updates = {result['train_6000_updates_cpu_minutes']:.1f} CPU-min; dev loss "
          f"{result['dev_loss_cpu_seconds']:.2f} CPU-s, after every epoch of 100 rows = "
          f"{result['validation_every_epoch_cpu_minutes_gold_only']:.1f} CPU-min")


if __name__ == "__main__":
    main()
