"""``compgen pipeline NAME --seeds ... --ray``: every seed of a pipeline run as one Ray
task; the results table is merged on the driver, in seed order."""

from __future__ import annotations

import dataclasses
import os

from compgen.pipelines.runs import find_run, merge_results, run_one
from compgen.sampling.ray import actor_gpus
from compgen.system.ray_cluster import start_ray


def run_seeds(name: str, seeds: list[int], opts, address: str | None = None) -> list[dict]:
    """``compgen pipeline NAME --seeds ... --ray``: every seed as one Ray task (one CPU);
    results are merged into the table as tasks finish, in seed order."""
    run = find_run(name)
    ray = start_ray(address, min(len(seeds), os.cpu_count() or 1))
    gpus = actor_gpus(ray, opts.device or "cpu", len(seeds))
    task = ray.remote(num_cpus=1, num_gpus=gpus)(
        lambda seed, options: run_one(find_run(name), seed, options))
    if gpus:   # Ray shows each task its share as GPU 0
        opts = dataclasses.replace(opts, device="cuda:0")
    quiet = dataclasses.replace(opts, log=print)   # the driver's console stays here
    futures = {seed: task.remote(seed, quiet) for seed in seeds}
    all_rows = []
    for seed in seeds:
        rows = ray.get(futures[seed])
        merge_results(opts.root, rows)
        all_rows += rows
        opts.log(f"[{run.name} seed {seed}] done (Ray task)")
    return all_rows
