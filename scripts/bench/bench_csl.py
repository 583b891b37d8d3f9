"""Time CSL grammar induction on SCAN and the indexed penalty counts it relies on.

    .venv/bin/python scripts/bench/bench_csl.py [--split length] [--patterns 400] [--json] [--data-dir DIR]

Side by side on the same rule sides of a real induction: counting the examples a rule
side may derive by token postings + the exact test (``SideIndex``) against running the
exact test on every example (what the reference does). Then the whole induction.
Run it with one thread (OMP_NUM_THREADS=1) on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

from _harness import cpu_flags

from compgen.augment.csl import induction
from compgen.augment.csl.derive import SideIndex, can_maybe_derive
from compgen.augment.csl.presets import preset
from compgen.data import load_dataset, select_split
from compgen.data.sources import resolve_data_dir
from compgen.data.table import pairs

CPU_FLAGS = ("avx", "avx2", "avx512f", "fma", "sse4_2")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="length")
    parser.add_argument("--patterns", type=int, default=400)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    table = load_dataset(f"scan/{args.split}", resolve_data_dir(args.data_dir))
    train = pairs(select_split(table, "train"))

    seen: list[tuple[str, ...]] = []
    original = induction.PenaltyStats.penalty

    def recording(self, rule):  # collect the rule sides the search really counts
        if len(seen) < args.patterns:
            seen.extend([rule.source, rule.target])
        return original(self, rule)

    induction.PenaltyStats.penalty = recording
    start = time.perf_counter()
    result = induction.induce(train, preset("scan").induction)
    induce_seconds = time.perf_counter() - start
    induction.PenaltyStats.penalty = original

    examples = induction.sorted_examples(train, dedup=True)
    sequences = [x for x, _ in examples] + [y for _, y in examples]
    index = SideIndex(sequences)
    start = time.perf_counter()
    indexed = [index.rows(p, len(sequences)).size for p in seen]
    indexed_seconds = time.perf_counter() - start
    start = time.perf_counter()
    plain = [sum(can_maybe_derive(p, s) for s in sequences) for p in seen]
    plain_seconds = time.perf_counter() - start
    if indexed != plain:
        raise SystemExit("indexed and plain counts differ")
    report = {"split": args.split, "train_pairs": len(train), "rules": len(result.rules),
              "induce_seconds": round(induce_seconds, 2), "rule_sides": len(seen),
              "count_indexed_seconds": round(indexed_seconds, 3), "count_plain_seconds": round(plain_seconds, 3),
              "speedup_indexed_over_plain": round(plain_seconds / max(indexed_seconds, 1e-9), 1),
              "cpu_flags": cpu_flags(CPU_FLAGS), "python": platform.python_version()}
    if args.json:
        print(json.dumps(report))
        return
    print(f"| split | pairs | rules | induce s | sides | indexed s | plain s | speed-up |\n|---|---|---|---|---|---|---|---|\n"
          f"| {args.split} | {len(train):,} | {len(result.rules)} | {induce_seconds:.1f} | {len(seen)} "
          f"| {indexed_seconds:.3f} | {plain_seconds:.3f} | {report['speedup_indexed_over_plain']}x |")
    print(f"CPU flags: {report['cpu_flags']}")


if __name__ == "__main__":
    main()
