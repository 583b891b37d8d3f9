"""KenLM scoring inside sampling: sentences/s of the Python scorer (kenlm module) and of the
C++ runner, and the LM's share of the sampling wall time, side by side in one run.

    .venv/bin/python scripts/bench_lm_scoring.py --base BASE.bin [--aug AUG.bin --weight 0.5]
    .venv/bin/python scripts/bench_lm_scoring.py ... --json

Sentences: the y side of the shipped SCAN generator's samples (ONNX Runtime, beam). C++:
``compgen-lm-score`` (KenLM's query library, the runner's scorer) on the same pairs
repeated ``--repeat`` times in one process, its start and model loading included. The
share is the scorer's time over the ONNX Runtime sampling run's wall time.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"


def cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                wanted = ("avx", "avx2", "avx512f", "fma", "sse4_2")
                return " ".join(f for f in line.split(":", 1)[1].split() if f in wanted)
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    from compgen.export.cpp_runner import lm_score_binary, score_with_cpp
    from compgen.lm.rerank import LmRanking
    from compgen.lm.scorer import side_text
    from compgen.runtime.sampler import sample_exported

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--aug")
    parser.add_argument("--weight", type=float)
    parser.add_argument("--n", type=int, default=128, help="samples of the ONNX run")
    parser.add_argument("--repeat", type=int, default=200, help="scoring passes over them")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    spec = args.base + (f",{args.aug}" if args.aug else "")
    ranking = LmRanking.from_options(spec, args.weight)
    run = sample_exported(SHIPPED, args.n, backend="onnx", strategy="beam", nsamples=args.n,
                          batch_size=128, seed=0, threads=1, log=lambda m: None, lm=ranking)
    pairs = [(s.x, s.y) for s in run.samples]
    scorer = ranking.scorer
    share = scorer.seconds / run.seconds

    binary = lm_score_binary(log=lambda m: None)
    many = pairs * args.repeat
    tic = time.perf_counter()
    score_with_cpp(many, ranking.runner_args())
    cpp_s = time.perf_counter() - tic
    sentences = [side_text(x, y, ranking.side) for x, y in pairs]
    tic = time.perf_counter()
    for _ in range(args.repeat):
        scorer.score(sentences)
    python_s = time.perf_counter() - tic
    report = {
        "sentences": len(many), "mix": scorer.mix if scorer.aug else "base",
        "weight": scorer.weight, "binary": str(binary),
        "cpp_sentences_per_s": round(len(many) / max(cpp_s, 1e-9)),
        "python_sentences_per_s": round(len(many) / max(python_s, 1e-9)),
        "cpp_lm_share_of_sampling": round(cpp_s / args.repeat / run.seconds, 6),
        "python_lm_share_of_sampling": round(share, 6),
        "sampling_s": round(run.seconds, 2),
        "cpu_flags": cpu_flags(), "python": platform.python_version(),
    }
    if args.json:
        print(json.dumps(report))
        return
    print("| scorer | sentences/s | LM share of sampling wall time |\n|---|---|---|\n"
          f"| C++ (KenLM query lib) | {report['cpp_sentences_per_s']:,} | "
          f"{report['cpp_lm_share_of_sampling']:.3%} of {run.seconds:.1f} s |\n"
          f"| Python (kenlm module) | {report['python_sentences_per_s']:,} | "
          f"{report['python_lm_share_of_sampling']:.3%} of {run.seconds:.1f} s |")
    print(f"C++/Python scoring speed: "
          f"{report['cpp_sentences_per_s'] / max(report['python_sentences_per_s'], 1):.1f}x; "
          f"CPU flags: {report['cpu_flags']}")


if __name__ == "__main__":
    main()
