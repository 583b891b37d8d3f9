#!/usr/bin/env python
"""Benchmark GECA: wall time, CPU time and peak RSS per case, each case in its own
subprocess (peak RSS from that child's rusage), printed as a Markdown table beside the
reference implementation's figures (geca-spec.md §12-§13).

    .venv/bin/python scripts/bench/bench_geca.py                 # every case
    .venv/bin/python scripts/bench/bench_geca.py scan-jump cogs  # some cases
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace

from _harness import ROOT

SHARED = ROOT.parent / "shared"
INPUTS = SHARED / "reference" / "geca-inputs"


def scan_input(split: str) -> str:
    """The reference's SCAN input file when it is beside this clone, else the data set
    (its train split with the reference's hold-out: the same examples)."""
    path = INPUTS / f"scan_{split}.txt"
    return str(path) if path.is_file() else f"scan/{split}"


# name -> (data, preset, overrides, reference figures as text)
CASES = {
    "scan-jump": (scan_input("jump"), "scan", {},
                  "1,000 (cap); HEAD: not finished after 18.5 min / 9.3 GB; grouped rewrite 4-8 CPU-min, 0.8 GB"),
    "scan-jump-v2-uncapped": (scan_input("jump"), "scan", {"n_sample": None},
                              "2,006 (1,990 with jump)"),
    "scan-jump-all-uncapped": (scan_input("jump"), "scan", {"n_sample": None, "variants": None},
                               "n/a (variants=all)"),
    "scan-around_right-v2-uncapped": (scan_input("around_right"), "scan", {"n_sample": None},
                                      "2,364; HEAD killed at 11.9 min / 6.9 GB"),
    "scan-around_right-all-uncapped": (scan_input("around_right"), "scan",
                                       {"n_sample": None, "variants": None}, "n/a (variants=all)"),
    "lm-kin": ("lm/kin", "lm", {}, "919 (197 fragments), 15-20 CPU-s, 0.2-0.4 GB"),
    "lm-lao": ("lm/lao", "lm", {}, "2,652, 23 CPU-s, 0.3-0.5 GB"),
    "lm-tok": ("lm/tok", "lm", {}, "1,445, 37-50 CPU-s, 0.3 GB"),
    "lm-na": ("lm/na", "lm-na", {}, "1,085 (1,085 templates, 23 fragments), ~1 CPU-min, 0.33 GB"),
    "cogs": ("cogs", "semparse", {}, "not finished: template extraction at example ~600/24,155 after 20 min"),
}


def child(name: str) -> None:
    """Run one case in this process and print its stats as JSON."""
    if (SHARED / "data").is_dir():   # the shared data folder beside a development checkout
        os.environ.setdefault("COMPGEN_DATA", str(SHARED / "data"))
    from compgen.augment.geca import geca_augment, load_training, make_config
    from compgen.data.sources import resolve_data_dir

    data, preset, overrides = CASES[name][:3]
    cfg = replace(make_config(preset), **overrides)
    table = load_training(data)
    start = time.perf_counter()
    result = geca_augment(table, cfg)
    stats = dict(result.stats, seconds_in_geca=time.perf_counter() - start)
    if name.startswith("scan"):
        from compgen.data.scan import load_scan_grammar, scan_sample_report

        pairs = list(zip(result.table["x"].to_list(), result.table["y"].to_list()))
        primitive = "jump" if "jump" in name else "right"
        report = scan_sample_report(pairs, result.train, load_scan_grammar(resolve_data_dir()), primitive)
        stats.update(correct_share=report["correct_share"],
                     primitive_new_share=report["uses_primitive_in_new_command_share"])
    print(json.dumps(stats))


def run(name: str) -> dict:
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, __file__, "--child", name], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"case {name} failed with exit code {proc.returncode}")
    stats = json.loads(out.strip().splitlines()[-1])
    stats.update(wall=time.perf_counter() - start, cpu=usage.ru_utime + usage.ru_stime,
                 rss_mb=usage.ru_maxrss / 1024)
    return stats


def share(stats: dict, key: str) -> str:
    return f"{100 * stats[key]:.1f} %" if key in stats else ""


def main(argv: list[str]) -> None:
    if argv[:1] == ["--child"]:
        child(argv[1])
        return
    names = argv or list(CASES)
    for name in names:
        if name not in CASES:
            raise SystemExit(f"unknown case {name} (valid: {', '.join(CASES)})")
    print("| case | examples | templates | synthesized | templates used | fragments used "
          "| correct | primitive in new command | wall s | CPU s | peak RSS MB | reference |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for name in names:
        s = run(name)
        print(f"| {name} | {s['training_examples']:,} | {s['templates']:,} | {s['synthesized']:,} "
              f"| {s['templates_used']:,} | {s['fragments_used']:,} | {share(s, 'correct_share')} "
              f"| {share(s, 'primitive_new_share')} | {s['wall']:.1f} | {s['cpu']:.1f} | {s['rss_mb']:,.0f} "
              f"| {CASES[name][3]} |", flush=True)
    print(f"\n(wall includes interpreter start-up and data loading; machine: {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main(sys.argv[1:])
