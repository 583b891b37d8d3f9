"""Induce a CSL grammar on COGS (variable-free targets, target CFG checker, no seed rules)
and report its size, time, peak memory and the coverage of dev and test.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/csl_cogs_induction.py [-o cogs.g.txt] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import resource
import time

from compgen.augment.csl import induction
from compgen.augment.csl.cogs_lf import to_variable_free
from compgen.augment.csl.rules import write_grammar
from compgen.augment.csl.run import derivable_share
from compgen.augment.csl.target_cfg import TargetChecker, cogs_target_cfg
from compgen.data.sources import resolve_data_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="cogs.g.txt")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    root = resolve_data_dir(args.data_dir) / "cogs"

    def read(name):
        rows = [line.split("\t") for line in (root / f"{name}.tsv").read_text().splitlines() if line.strip()]
        return [(r[0].split(), to_variable_free(r[0].split(), r[1]).split()) for r in rows]

    train, dev, test = read("train"), read("dev"), read("test")
    checker = TargetChecker(cogs_target_cfg([y for _, y in train]))
    start = time.perf_counter()
    result = induction.induce(train, induction.INDUCTION_PRESETS["cogs"], target_ok=checker.can_parse,
                              progress=lambda info: print(info, flush=True))
    seconds = time.perf_counter() - start
    write_grammar(args.output, result.rules, header="CSL grammar induced from COGS train (no seed rules)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"rules {len(result.rules)}, induction {seconds:.0f} s, peak RSS {peak:.0f} MB")
    for name, data in (("dev", dev), ("test", test)):
        print(f"{name} derivable {derivable_share(result.rules, data, max_unary=2):.2%}")


if __name__ == "__main__":
    main()
