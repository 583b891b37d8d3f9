"""Induce a CSL grammar on COGS (variable-free targets, target CFG checker, the IBM-1 seed
rules) and report its size, time, peak memory and the coverage of dev and test.

    OMP_NUM_THREADS=1 .venv/bin/python scripts/analyze/csl_cogs_induction.py [-o cogs.g.txt] [--data-dir DIR] [--no-seeds]
"""

from __future__ import annotations

import argparse
import resource
import time

from compgen.augment.csl import induction
from compgen.augment.csl.cogs_lf import to_variable_free
from compgen.augment.csl.presets import preset
from compgen.augment.csl.rules import write_grammar
from compgen.augment.csl.run import derivable_share
from compgen.augment.csl.seed_rules import cogs_seed_rules
from compgen.augment.csl.target_cfg import TargetChecker, cogs_target_cfg
from compgen.data.sources import resolve_data_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", default="cogs.g.txt")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--no-seeds", action="store_true", help="induce without the seed rules")
    args = parser.parse_args()
    root = resolve_data_dir(args.data_dir) / "cogs"

    def read(name):
        rows = [line.split("\t") for line in (root / f"{name}.tsv").read_text().splitlines() if line.strip()]
        return [(r[0].split(), to_variable_free(r[0].split(), r[1]).split()) for r in rows]

    train, dev, test = read("train"), read("dev"), read("test")
    checker = TargetChecker(cogs_target_cfg([y for _, y in train]))
    start = time.perf_counter()
    seeds = [] if args.no_seeds else cogs_seed_rules(train)
    print(f"seed rules {len(seeds)} ({time.perf_counter() - start:.0f} s)", flush=True)
    result = induction.induce(train, preset("cogs").induction, seeds=seeds,
                              target_ok=checker.can_parse, progress=lambda info: print(info, flush=True))
    seconds = time.perf_counter() - start
    write_grammar(args.output, result.rules, header="CSL grammar induced from COGS train "
                  + ("(no seed rules)" if args.no_seeds else f"({len(seeds)} seed rules)"))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    kept = sum(rule in set(result.rules) for rule in seeds)
    print(f"rules {len(result.rules)} ({kept} of {len(seeds)} seeds kept), seeds + induction "
          f"{seconds:.0f} s, peak RSS {peak:.0f} MB")
    for name, data in (("dev", dev), ("test", test)):
        print(f"{name} derivable {derivable_share(result.rules, data, max_unary=2):.2%}")


if __name__ == "__main__":
    main()
