"""Time the neighbourhood builders and compare their counts with the reference figures.

    .venv/bin/python scripts/bench/bench_neighborhoods.py [--data-dir DIR] [--seed 0] [--workers 1]

(the data folder defaults to $COMPGEN_DATA, as for the CLI)

Prints a Markdown table: SCAN jump (long-short) and around_right (long-long) triples,
distinct x / (x, xp), Omega sizes, against the reference statistics (which came from an
implementation with another random generator, so near but not identical), and the time
to rebuild all 15 SIGMORPHON few-shot splits of one language (no cache).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import polars as pl

from compgen import neighborhoods as nb
from compgen.data import load_dataset
from compgen.data import sigmorphon as sg
from compgen.data.sources import resolve_data_dir

REFERENCE = {  # rr-spec Appendix A
    "jump": {"triples": 38614, "distinct x": 9081, "distinct (x, xp)": 20202, "omega": 126435},
    "around_right": {
        "triples": 125716,
        "distinct x": 14677,
        "distinct (x, xp)": 44031,
        "omega": 3750991,
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--lang", default="turkish")
    args = parser.parse_args()
    data_dir = resolve_data_dir(args.data_dir)

    rows = []
    for split in ("jump", "around_right"):
        table = load_dataset(f"scan/{split}", data_dir)
        start, cpu = time.perf_counter(), time.process_time()
        triples = nb.scan_neighborhood(
            table, split, seed=args.seed, workers=args.workers, use_cache=False
        )
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        start = time.perf_counter()
        omega = nb.scan_omega(nb.unique_generative_data(table), triples, 2, split, rng=args.seed)
        omega_seconds = time.perf_counter() - start
        ours = {
            "triples": triples.height,
            "distinct x": triples["x"].n_unique(),
            "distinct (x, xp)": triples.select("x", "xp").unique().height,
            "omega": len(omega),
        }
        kind = "long-short" if split == "jump" else "long-long"
        rows.append(
            f"| {split} ({kind}) | {seconds:.1f} s wall, {cpu:.1f} s CPU "
            f"(Omega {omega_seconds:.1f} s) | "
            + " | ".join(f"{ours[k]:,} / {REFERENCE[split][k]:,}" for k in ours)
            + " |"
        )

    with tempfile.TemporaryDirectory() as cache:
        start, cpu = time.perf_counter(), time.process_time()
        sg.build_fewshot(args.lang, "hints-16.4", data_dir, Path(cache))  # replays all 15
        sig_seconds, sig_cpu = time.perf_counter() - start, time.process_time() - cpu

    print(
        "| neighbourhood | time | triples (ours / ref) | distinct x | distinct (x, xp) | "
        "Omega (2 protos) |"
    )
    print("|---|---|---|---|---|---|")
    print("\n".join(rows))
    print()
    print("| SIGMORPHON few-shot | time | reference build script |")
    print("|---|---|---|")
    print(
        f"| {args.lang}: all 15 builds (hints 4/8/16 x 5), RNG chain replayed | "
        f"{sig_seconds:.1f} s wall, {sig_cpu:.1f} s CPU | ~3.5 min per build, ~52 min for 15 |"
    )


if __name__ == "__main__":
    pl.Config.set_tbl_rows(20)
    main()
