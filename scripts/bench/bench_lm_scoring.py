"""KenLM scoring inside sampling: sentences/s of the n-gram scorer inside the C++ runner
(KenLM's query library, scoring every accepted candidate in its loop) and inside the
ONNX Runtime sampler (the kenlm Python module), and the scorer's share of each sampling
run's wall time, side by side in one run.

    .venv/bin/python scripts/bench/bench_lm_scoring.py --base BASE.bin [--aug AUG.bin --weight 0.5]
        [--side y] [--n 400 --nsamples 1000] [--json FILE]

Both backends sample the shipped SCAN generator with the same seed and LM options (one
thread each, so the two runs compare on a shared machine); each reports how many
candidates its scorer scored and the time spent in it. Scores on so few sentences are
dominated by per-call costs, so the scorers also score the same sentences ``--repeat``
times outside sampling: C++ as ``compgen-lm-score`` (process start and model loading
included), Python as the kenlm module through ``compgen.lm.scorer.NgramScorer``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

from _harness import SHIPPED, cpu_flags

CPU_FLAGS = ("avx", "avx2", "avx512f", "fma", "sse4_2", "amx_bf16", "avx512_bf16")


def in_sampling(backend: str, args) -> dict:
    """One sampling run with the LM; the scorer's counts as that backend reports them."""
    from compgen.lm.rerank import LmRanking
    from compgen.sampling.run import sample_export

    spec = args.base + (f",{args.aug}" if args.aug else "")
    ranking = LmRanking.from_options(spec, args.weight, side=args.side, mix=args.mix,
                                     rerank=args.rerank)
    run = sample_export(args.export, n=args.n, backend=backend, strategy=args.strategy,
                        nsamples=args.nsamples, batch_size=args.batch_size, seed=0,
                        threads=1, log=lambda m: None, lm=ranking)
    scorer = ranking.scorer
    return {"backend": backend, "sentences": scorer.sentences,
            "lm_s": round(scorer.seconds, 6), "sampling_s": round(run.seconds, 3),
            "sentences_per_s": round(scorer.sentences / max(scorer.seconds, 1e-9)),
            "lm_share": round(scorer.seconds / run.seconds, 6),
            "pairs": [(s.x, s.y) for s in run.samples], "ranking": ranking}


def repeated(pairs, ranking, repeat: int) -> dict:
    """The same sentences scored ``repeat`` times by each scorer outside sampling."""
    from compgen.lm.scorer import side_text
    from compgen.runtimes.cpp import lm_score_binary, score_with_cpp

    lm_score_binary(log=lambda m: None)  # built before the clock starts
    many = pairs * repeat
    tic = time.perf_counter()
    score_with_cpp(many, ranking.runner_args())
    cpp_s = time.perf_counter() - tic
    sentences = [side_text(x, y, ranking.side) for x, y in pairs]
    tic = time.perf_counter()
    for _ in range(repeat):
        ranking.scorer.score(sentences)
    python_s = time.perf_counter() - tic
    return {"sentences": len(many),
            "cpp_sentences_per_s": round(len(many) / max(cpp_s, 1e-9)),
            "python_sentences_per_s": round(len(many) / max(python_s, 1e-9))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--aug")
    parser.add_argument("--weight", type=float)
    parser.add_argument("--mix", default="token")
    parser.add_argument("--side", default="y")
    parser.add_argument("--rerank", default="sum")
    parser.add_argument("--export", type=Path, default=SHIPPED)
    parser.add_argument("--strategy", default="beam")
    parser.add_argument("--n", type=int, default=400, help="samples kept")
    parser.add_argument("--nsamples", type=int, default=1000, help="candidates accepted")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--repeat", type=int, default=200, help="passes outside sampling")
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    runs = [in_sampling(backend, args) for backend in ("cpp", "onnx")]
    same = runs[0]["pairs"] == runs[1]["pairs"]
    outside = repeated(runs[1]["pairs"], runs[1]["ranking"], args.repeat)
    for run in runs:
        del run["pairs"], run["ranking"]
    report = {"lm": {"base": args.base, "aug": args.aug, "weight": args.weight, "mix": args.mix,
                     "side": args.side, "rerank": args.rerank},
              "sampling": {"export": str(args.export), "strategy": args.strategy, "n": args.n,
                           "nsamples": args.nsamples, "threads": 1},
              "in_sampling": runs, "same_samples": same, "outside_sampling": outside,
              "cpu_flags": cpu_flags(CPU_FLAGS), "load_average": [load_before, os.getloadavg()[0]],
              "python": platform.python_version()}
    print("| scorer | sentences scored | sentences/s | LM share of sampling wall time |\n"
          "|---|---:|---:|---:|")
    for run, name in zip(runs, ("C++ runner (KenLM query library)", "ONNX Runtime (kenlm module)")):
        print(f"| {name} | {run['sentences']:,} | {run['sentences_per_s']:,} | "
              f"{run['lm_share']:.3%} of {run['sampling_s']:.1f} s |")
    print(f"same samples from both: {'yes' if same else 'NO'}; outside sampling, "
          f"{outside['sentences']:,} sentences: C++ {outside['cpp_sentences_per_s']:,}/s "
          f"(process start included), Python {outside['python_sentences_per_s']:,}/s")
    print(f"CPU flags: {report['cpu_flags']}; load average {load_before:.1f} -> "
          f"{report['load_average'][1]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
