"""Sampling on a local Ray cluster: 1 actor against 2 actors (side by side, one cluster),
the same file from both, and the numbers the N-machine model in docs/scaling.md uses.

    .venv/bin/python scripts/bench/bench_ray_sampling.py [--n 2000] [--strategy greedy] [--json]

Each configuration (1, 2, 2 and 1 actors, in that order) samples the shipped SCAN generator (ONNX Runtime, one intra-op
thread per actor) with the same seed. Reported per configuration: wall time, samples/s,
rounds decoded, the driver's own time (filtering and merging: wall time minus the time it
waited for actors) per round, and the actors' decoding time per round.
"""

from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
from _harness import ROOT, SHIPPED, cpu_flags

CPU_FLAGS = ("avx", "avx2", "avx512f", "fma", "sse4_2")


class CountingFactory:
    """The Ray decoder factory, keeping the decoder it made (for its counters)."""

    def __init__(self, workers: int, lookahead: int):
        from compgen.sampling.ray import RayDecoderFactory

        self.inner = RayDecoderFactory(None, workers, 1, lookahead)
        self.check = self.inner.check
        self.decoder = None
        self.calls = 0
        self.first_round_s = 0.0  # actors' start (process, imports, export load) + one round

    def __call__(self, *args, **kwargs):
        decoder = self.inner(*args, **kwargs)
        self.decoder = decoder

        def counted(idx, strategy, temperature, first=0):
            self.calls += 1
            tic = time.perf_counter()
            result = decoder(idx, strategy, temperature, first)
            if self.calls == 1:
                self.first_round_s = time.perf_counter() - tic
            return result
        return counted


def main() -> None:
    import ray

    from compgen.sampling.run import sample_export

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--strategy", default="greedy", choices=("greedy", "beam"))
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    rows, files = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        # 1, 2, 2, 1: each size measured early and late in the run (the medians are reported)
        for workers in (1, 2, 2, 1):
            factory = CountingFactory(workers, 2 * workers)
            out = Path(tmp) / f"w{workers}.tsv"
            tic = time.perf_counter()
            run = sample_export(SHIPPED, n=args.n, backend="onnx", strategy=args.strategy,
                                nsamples=args.n, batch_size=args.batch_size, seed=args.seed,
                                threads=1, out=out, log=lambda m: None,
                                decoder_factory=factory)
            wall = time.perf_counter() - tic
            files[workers] = out.read_bytes()
            waited = factory.decoder.remote_seconds
            steady = run.seconds - factory.first_round_s
            rows.append({"workers": workers, "wall_s": round(wall, 2),
                         "sampling_s": round(run.seconds, 2),
                         "samples_per_s": round(len(run.samples) / run.seconds, 2),
                         "first_round_s": round(factory.first_round_s, 2),
                         "after_first_round_s": round(steady, 2),
                         "rounds": factory.calls,
                         "driver_s_per_round": round((run.seconds - waited) / factory.calls, 4),
                         "waited_s": round(waited, 2)})
    ray.shutdown()

    def median(workers: int, key: str) -> float:
        return float(np.median([r[key] for r in rows if r["workers"] == workers]))

    report = {"n": args.n, "strategy": args.strategy, "batch_size": args.batch_size,
              "rows": rows, "same_file": files[1] == files[2],
              "speedup_2_over_1": round(median(1, "sampling_s") / median(2, "sampling_s"), 3),
              "speedup_after_first_round": round(median(1, "after_first_round_s")
                                                 / median(2, "after_first_round_s"), 3),
              "cpu_flags": cpu_flags(CPU_FLAGS), "python": platform.python_version()}
    if args.json:
        print(json.dumps(report))
        return
    print("| Ray actors | sampling s | samples/s | first round s | after it s | rounds "
          "| driver s/round |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workers']} | {r['sampling_s']} | {r['samples_per_s']} "
              f"| {r['first_round_s']} | {r['after_first_round_s']} | {r['rounds']} "
              f"| {r['driver_s_per_round']} |")
    print(f"2 actors / 1 actor (medians): {report['speedup_2_over_1']}x, after the first round "
          f"(actors started, export loaded) {report['speedup_after_first_round']}x; same file: "
          f"{report['same_file']}; CPU flags: {report['cpu_flags']}")


if __name__ == "__main__":
    main()
