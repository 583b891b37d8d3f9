"""KenLM scoring inside sampling: sentences/s of the Python scorer (kenlm module) and of the
C++ runner, and the LM's share of the sampling wall time, side by side in one run.

    .venv/bin/python scripts/bench_lm_scoring.py --base BASE.bin [--aug AUG.bin --weight 0.5]
    .venv/bin/python scripts/bench_lm_scoring.py ... --json

Sentences: the y side of the shipped SCAN generator's samples (C++ runner, beam). The
C++ share is the runner's own LM time over its sampling time (one process, ``--n``
samples); the Python share is the scorer's time over an ONNX Runtime sampling run.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import tempfile
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
    from compgen.export.cpp_runner import build_runner, read_cpp_samples
    from compgen.lm.rerank import LmRanking
    from compgen.runtime.sampler import sample_exported

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True)
    parser.add_argument("--aug")
    parser.add_argument("--weight", type=float)
    parser.add_argument("--n", type=int, default=512, help="samples the C++ runner draws")
    parser.add_argument("--python-n", type=int, default=128, help="samples of the ONNX run")
    parser.add_argument("--repeat", type=int, default=20, help="Python scorer passes")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    spec = args.base + (f",{args.aug}" if args.aug else "")
    ranking = LmRanking.from_options(spec, args.weight)
    runner = build_runner(log=lambda m: None, kenlm=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "samples.tsv"
        proc = subprocess.run([str(runner), str(SHIPPED), "-o", str(out), "--n", str(args.n),
                               "--batch-size", "128", "--strategy", "beam", "--threads", "1",
                               *ranking.runner_args()], capture_output=True, text=True,
                              check=True)
        sentences = [" ".join(y) for _, y, _, _ in read_cpp_samples(out)]
    sampled = re.search(r"sampled (\d+) in ([\d.e+-]+) s", proc.stderr)
    scored = re.search(r"lm scored (\d+) in ([\d.e+-]+) s", proc.stderr)
    cpp_sample_s, cpp_lm_s = float(sampled.group(2)), float(scored.group(2))

    scorer = ranking.scorer
    tic = time.perf_counter()
    for _ in range(args.repeat):
        scorer.score(sentences)
    python_s = (time.perf_counter() - tic) / args.repeat

    fresh = LmRanking.from_options(spec, args.weight)
    run = sample_exported(SHIPPED, args.python_n, backend="onnx", strategy="beam",
                          nsamples=args.python_n, batch_size=128, seed=0, threads=1,
                          log=lambda m: None, lm=fresh)
    report = {
        "sentences": len(sentences), "mix": scorer.mix if scorer.aug else "base",
        "weight": scorer.weight,
        "cpp_sentences_per_s": round(int(scored.group(1)) / max(cpp_lm_s, 1e-9)),
        "python_sentences_per_s": round(len(sentences) / max(python_s, 1e-9)),
        "cpp_lm_share_of_sampling": round(cpp_lm_s / cpp_sample_s, 5),
        "cpp_sampling_s": round(cpp_sample_s, 2),
        "python_lm_share_of_sampling": round(fresh.scorer.seconds / run.seconds, 5),
        "python_sampling_s": round(run.seconds, 2),
        "cpu_flags": cpu_flags(), "python": platform.python_version(),
    }
    if args.json:
        print(json.dumps(report))
        return
    print("| scorer | sentences/s | LM share of sampling wall time |\n|---|---|---|\n"
          f"| C++ runner (KenLM query lib) | {report['cpp_sentences_per_s']:,} | "
          f"{report['cpp_lm_share_of_sampling']:.2%} of {cpp_sample_s:.1f} s |\n"
          f"| Python (kenlm module) | {report['python_sentences_per_s']:,} | "
          f"{report['python_lm_share_of_sampling']:.2%} of {run.seconds:.1f} s |")
    print(f"C++/Python scoring speed: "
          f"{report['cpp_sentences_per_s'] / max(report['python_sentences_per_s'], 1):.1f}x; "
          f"CPU flags: {report['cpu_flags']}")


if __name__ == "__main__":
    main()
