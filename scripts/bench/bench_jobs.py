"""Whole `compgen sample` jobs as a user runs them, this tree against a base commit.

Each measurement is one `python -m compgen sample EXPORT ...` process (start-up, loading,
decoding, filtering, writing), timed from outside; the base commit's tree (a git worktree,
the same virtualenv) runs the same command right before or after (the order alternates),
so every ratio is measured side by side on the same machine in one run. Reported per job
and backend: wall seconds, kept samples/s, candidates decoded and the acceptance rate (as
the job's summary line states them; the base may not state them), peak RSS of the process
tree, and the share of kept samples that are correct SCAN pairs (the full grammar). The
same seed must give the same samples in the same order on every fp32 backend (checked per
job; the logprob column agrees within the decoding contract's tolerance). Each tree's
caches are warmed first (runner build, check record, optimised graphs), as a user's
second job finds them.

Jobs (the shipped generator exported/scan-jump-recomb2):
  a  the model card's job:            --n 400
  b  resampled:                       --n 400 --nsamples 1500 --resample rare
  c  large, temperature sampling:     --n 20000 --strategy temperature -T 1 --resample none

    python scripts/bench/bench_jobs.py --json bench-jobs.json                 # all jobs, 4 backends
    python scripts/bench/bench_jobs.py --jobs a --backends onnx,cpp --json a.json
    python scripts/bench/bench_jobs.py --jobs c --large-n 2000 --json c.json  # a shorter job c
    python scripts/bench/bench_jobs.py --jobs a,b --backends onnx --repeat 5  # medians of 5

With --repeat N each tree runs each job N times (the order alternating every run): a
tree's figures are its run of median wall time, the ratios the median of the N pairwise
ratios, and the JSON keeps every run's wall seconds.

With --novel-inputs, jobs that do not beam-search (c) also run on this tree with
`--novel-inputs` (column "novel", in the same alternation): <sep> is masked where the
input so far is a training input (compgen.decoding.input_trie), which changes what is
drawn. Per tree: kept/s, the share of kept inputs that are novel, the share correct, and
the share of kept inputs that extend a training input (one of its proper prefixes is a
training input: what masking makes likelier than rejection does) and their mean length. Ratios: "speedup" this
against base, "novel_speedup" novel against base, "novel_vs_this" novel against this.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import (
    ROOT,
    SHIPPED,
    alternating,
    base_tree,
    cpu_flag_list,
    cpu_model,
    load_average,
    tree_env,
)

EXPORT = SHIPPED
BASE = "894b2c3"
BACKENDS = ("onnx", "torchscript", "cpp", "torch")
FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def jobs(large_n: int) -> dict[str, list[str]]:
    return {
        "a": ["--n", "400"],
        "b": ["--n", "400", "--nsamples", "1500", "--resample", "rare"],
        # -T 1 draws anew in every pass over the prototype tuples: rounds are bounded by
        # what the job asks for, not by the 200-round default
        "c": ["--n", str(large_n), "--strategy", "temperature", "-T", "1",
              "--resample", "none", "--max-rounds", "100000"],
    }


def variant_args(name: str, args: list[str]) -> list[str]:
    """A job's options on one column: "novel" adds --novel-inputs."""
    return [*args, "--novel-inputs"] if name == "novel" else args


def run_job(tree: Path, args: list[str], backend: str, precision: str, out: Path) -> dict:
    """One whole process; wall seconds, peak RSS (MB, the process and what it waited
    for: the C++ runner included) and what its summary line says."""
    env = tree_env(tree)
    cmd = [sys.executable, "-m", "compgen", "sample", str(EXPORT), *args, "--backend", backend,
           "--seed", "0", "-o", str(out)]
    if precision != "fp32":
        cmd += ["--precision", precision]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - started
    # the children's peak is the largest of every descendant this process has waited for:
    # one job per wrapper keeps it per job (see measure)
    if proc.returncode != 0:
        raise SystemExit(f"{tree.name}: {' '.join(cmd[3:])} failed:\n{stderr[-2000:]}")
    summary = stdout + stderr
    # the summary line may be wrapped at any space
    decoded = re.search(r"([\d,]+)\s+candidates\s+decoded", summary)
    accepted = re.search(r"([\d.]+)%\s+accepted", summary)
    return {"wall_s": round(wall, 2),
            "decoded": int(decoded.group(1).replace(",", "")) if decoded else None,
            "acceptance": round(float(accepted.group(1)) / 100, 4) if accepted else None}


def measure(tree: Path, args: list[str], backend: str, precision: str, out: Path) -> dict:
    """``run_job`` in a fresh wrapper process, so its RUSAGE_CHILDREN peak is this job's."""
    code = ("import json, resource, sys; sys.path.insert(0, sys.argv[1]); "
            "import bench_jobs as b; from pathlib import Path; "
            "r = b.run_job(Path(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4], sys.argv[5], "
            "Path(sys.argv[6])); "
            "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
            "r['peak_rss_mb'] = round(u.ru_maxrss / 1024); "
            "r['cpu_s'] = round(u.ru_utime + u.ru_stime, 2); "
            "print(json.dumps(r))")
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent), str(tree),
                           json.dumps(args), backend, precision, str(out)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:] or done.stdout[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def quality(out: Path) -> dict:
    """Kept samples, the share that are correct SCAN pairs (the embedded grammar), whose
    input is novel, and whose input extends a training input (a proper prefix of it is
    one)."""
    from compgen.data import load_dataset, select_split
    from compgen.data.scan import load_scan_grammar, scan_sample_report
    from compgen.data.sources import resolve_data_dir
    from compgen.io import parse_samples_tsv

    pairs = parse_samples_tsv(out.read_text(encoding="utf-8"), str(out))
    train = select_split(load_dataset("scan/jump"), "train")
    report = scan_sample_report(pairs, train, load_scan_grammar(resolve_data_dir(None)), "jump")
    known = {tuple(x) for x in train["x"].to_list()}
    extends = sum(any(tuple(x[:k]) in known for k in range(1, len(x))) for x, _ in pairs)
    return {"kept": len(pairs), "correct_share": round(report["correct_share"], 4),
            "novel_share": round(report["novel_share"], 4),
            "extends_training_share": round(extends / max(len(pairs), 1), 4),
            "mean_input_length": round(sum(len(x) for x, _ in pairs) / max(len(pairs), 1), 3)}


def main() -> None:
    # a stopped benchmark (SIGTERM) unwinds like Ctrl-C: its temporary folders are removed
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", default="a,b,c")
    parser.add_argument("--backends", default=",".join(BACKENDS),
                        help="comma-separated; NAME:bf16 for reduced precision")
    parser.add_argument("--base", default=BASE, help="base commit (default %(default)s)")
    parser.add_argument("--base-tree", type=Path, help="an existing checkout of the base")
    parser.add_argument("--large-n", type=int, default=20_000, help="job c's --n")
    parser.add_argument("--no-base", action="store_true", help="this tree only")
    parser.add_argument("--novel-inputs", action="store_true",
                        help="also run this tree with --novel-inputs (jobs without beam search)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="runs of each job per tree, the trees' order alternating; the "
                             "figures are the run of median wall time and the median of the "
                             "pairwise ratios (a shared machine's spread is ±10 %%)")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error(f"--repeat {args.repeat}: must be >= 1")

    backends = [b.split(":") if ":" in b else (b, "fp32") for b in args.backends.split(",")]
    trees = {"this": ROOT}
    if not args.no_base:
        trees["base"] = base_tree(args.base, args.base_tree)
    print(f"CPU: {cpu_model()}, {os.cpu_count()} cores, flags: {' '.join(cpu_flag_list(FLAGS)) or '-'}; "
          f"load average {load_average(1)}")
    table = jobs(args.large_n)
    results = []
    # warm every tree's caches first (the C++ runner's build, the passed-check record, the
    # optimised ONNX graphs): a user's second job finds them built, and so do the timings
    with tempfile.TemporaryDirectory(prefix="compgen-bench-warm-") as tmp:
        for name, tree in trees.items():
            for backend, precision in backends:
                run_job(tree, ["--n", "1", "--max-rounds", "1"], backend, precision,
                        Path(tmp) / f"{name}-{backend}.tsv")
    with tempfile.TemporaryDirectory(prefix="compgen-bench-jobs-") as tmp:
        for job in args.jobs.split(","):
            files = {}
            for turn, (backend, precision) in enumerate(backends):
                row = {"job": job, "args": " ".join(table[job]), "backend": backend,
                       "precision": precision}
                names = list(trees)
                if args.novel_inputs and "--strategy" in table[job]:   # not the preset's beam
                    names.append("novel")
                runs: dict[str, list[dict]] = {}
                for repeat in range(args.repeat):
                    for name in alternating(names, turn + repeat):
                        out = Path(tmp) / f"{job}-{backend}-{precision}-{name}.tsv"
                        got = measure(trees.get(name, ROOT), variant_args(name, table[job]),
                                      backend, precision, out)
                        got.update(quality(out))
                        got["kept_per_s"] = round(got["kept"] / got["wall_s"], 2)
                        got["kept_per_cpu_s"] = round(got["kept"] / max(got["cpu_s"], 1e-9), 2)
                        runs.setdefault(name, []).append(got)
                for name, measured in runs.items():
                    out = Path(tmp) / f"{job}-{backend}-{precision}-{name}.tsv"
                    by_wall = sorted(measured, key=lambda got: got["wall_s"])
                    row[name] = {**by_wall[len(by_wall) // 2],
                                 "wall_s_runs": [got["wall_s"] for got in measured]}
                    if name in ("this", "novel") and precision == "fp32":
                        files.setdefault(name, {})[backend] = out.read_text(encoding="utf-8")
                if "base" in row:
                    def ratio(figure: str) -> float:
                        return round(statistics.median(
                            this[figure] / max(base[figure], 1e-9)
                            for this, base in zip(runs["this"], runs["base"])), 2)

                    row["speedup"] = ratio("kept_per_s")
                    # CPU seconds of the process tree: what the job costs, however many
                    # other processes shared the cores while it ran
                    row["speedup_cpu"] = ratio("kept_per_cpu_s")
                if "novel" in row:
                    row["novel_vs_this"] = round(row["novel"]["kept_per_s"]
                                                 / max(row["this"]["kept_per_s"], 1e-9), 2)
                    if "base" in row:
                        row["novel_speedup"] = round(row["novel"]["kept_per_s"]
                                                     / max(row["base"]["kept_per_s"], 1e-9), 2)
                results.append(row)
                for name in [k for k in ("this", "novel", "base") if k in row]:
                    got = row[name]
                    print(f"job {job} {backend:<11} {precision} {name:<5}: {got['kept']} kept in "
                          f"{got['wall_s']} s ({got['cpu_s']} CPU s) = {got['kept_per_s']}/s, "
                          f"decoded {got['decoded']}, novel {got['novel_share']:.1%}, correct "
                          f"{got['correct_share']:.1%}, extends a training input "
                          f"{got['extends_training_share']:.1%}, mean input length "
                          f"{got['mean_input_length']}", flush=True)
                if "novel" in row:
                    print(f"job {job} {backend}: novel/this x{row['novel_vs_this']}"
                          + (f", novel/base x{row['novel_speedup']}" if "base" in row else ""),
                          flush=True)
                this = row["this"]
                print(f"job {job} {backend:<11} {precision}: {this['kept']} kept in "
                      f"{this['wall_s']} s ({this['cpu_s']} CPU s) = {this['kept_per_s']}/s, "
                      f"decoded {this['decoded']}, "
                      f"acceptance {this['acceptance']}, {this['peak_rss_mb']} MB, correct "
                      f"{this['correct_share']:.1%}"
                      + (f" | base {row['base']['kept']} in {row['base']['wall_s']} s "
                         f"({row['base']['cpu_s']} CPU s) = {row['base']['kept_per_s']}/s, "
                         f"{row['base']['peak_rss_mb']} MB, correct "
                         f"{row['base']['correct_share']:.1%} | x{row['speedup']} wall, "
                         f"x{row['speedup_cpu']} CPU"
                         if "base" in row else ""), flush=True)
            for name, by_backend in files.items():
                if len(by_backend) < 2:
                    continue
                # the same samples in the same order; the logprob column agrees within the
                # contract's tolerance (ONNX Runtime and libtorch differ in the last digits)
                identical = len(set(by_backend.values())) == 1
                samples = {b: [line.split("\t")[:2] for line in text.splitlines()]
                           for b, text in by_backend.items()}
                same = all(rows == next(iter(samples.values())) for rows in samples.values())
                print(f"job {job} ({name}): fp32 backends {', '.join(by_backend)}: same samples "
                      f"in the same order: {same}; byte-identical files: {identical}")
                results.append({"job": job, "column": name, "across": sorted(by_backend),
                                "same_samples": same, "byte_identical": identical})
    print(f"load average at the end: {load_average(1)}")
    report = {"cpu": cpu_model(), "cores": os.cpu_count(), "flags": cpu_flag_list(FLAGS),
              "base": None if args.no_base else args.base, "results": results}
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
