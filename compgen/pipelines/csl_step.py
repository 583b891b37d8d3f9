"""The augment step of the CSL pipeline rows (``<split>-csl``, ``<split>-csl-uniform``):
induce the QCFG from the split's training pairs, fit its model (unless uniform), sample
100,000 pairs, and keep those the predictor can read.

Files left in the run folder: ``grammar.txt`` (the induced rules), ``samples.tsv`` (every
sample), ``augment.tsv`` (the samples whose command and actions fit the predictor's
``max_len``; longer ones would be cut without an end token), ``csl.json`` (the summary,
the phases' wall time and peak memory, and the samples' quality by the SCAN grammar).
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path

from compgen.io import atomic_open

CSL_SAMPLES = 100_000  # the paper's number for every data set (spec §4.4)


def fits(pair, max_len: int) -> bool:
    return len(pair[0]) <= max_len and len(pair[1]) <= max_len


def sample_quality(samples, table, data_dir) -> dict:
    """Shares of samples that are SCAN commands with the right actions (``scan/tasks.txt``)
    and that translate correctly by the SCAN reading of any nesting."""
    from compgen.data import select_split
    from compgen.data.scan import load_scan_grammar, scan_sample_report
    from compgen.data.scan_semantics import correct_share
    from compgen.data.sources import resolve_data_dir

    report = scan_sample_report(samples, select_split(table, "train"),
                                load_scan_grammar(resolve_data_dir(data_dir)))
    return {"novel_share": report["novel_share"], "scan_command_correct_share": report["correct_share"],
            "scan_reading_correct_share": correct_share(samples)}


def make_csl(data: str, uniform: bool, seed: int, folder: Path, max_len: int,
             data_dir=None, n_samples: int = CSL_SAMPLES, log=print) -> tuple[Path, dict]:
    """Write the step's files into ``folder`` (see the module docstring); returns the path
    of ``augment.tsv`` and the summary. A finished step (``augment.tsv`` present) is reused."""
    from compgen.augment.csl.rules import write_grammar
    from compgen.augment.csl.run import csl_augment, preset
    from compgen.data import load_dataset, select_split
    from compgen.data.table import pairs as table_pairs
    from compgen.io import write_samples_tsv

    path, report_path = folder / "augment.tsv", folder / "csl.json"
    if path.is_file() and report_path.is_file():
        return path, json.loads(report_path.read_text(encoding="utf-8"))
    cfg = preset("scan")
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(cfg.model, seed=seed),
                              sampler=dataclasses.replace(cfg.sampler, seed=seed))
    table = load_dataset(data, data_dir)
    train = table_pairs(select_split(table, "train"))
    test = table_pairs(select_split(table, "test"))
    tic = time.perf_counter()
    result = csl_augment(train, cfg, n_samples, test, uniform=uniform)
    write_grammar(folder / "grammar.txt", result.rules,
                  header=f"CSL grammar induced from {data} (config scan)")
    write_samples_tsv(folder / "samples.tsv", result.samples)
    kept = [pair for pair in result.samples if fits(pair, max_len)]
    report = {**result.summary, "uniform": uniform, "max_len": max_len, "kept_samples": len(kept),
              "seconds": round(time.perf_counter() - tic, 1), "phases": result.phases,
              **sample_quality(result.samples, table, data_dir)}
    with atomic_open(report_path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    write_samples_tsv(path, kept)  # last: its presence marks the step finished
    log(f"CSL {data}{' (uniform)' if uniform else ''}: {report['rules']} rules, test derivable "
        f"{report.get('test_coverage', float('nan')):.2%}, {len(kept):,} of {len(result.samples):,} "
        f"samples fit max_len {max_len}; SCAN commands with the right actions "
        f"{report['scan_command_correct_share']:.2%}, correct by the SCAN reading "
        f"{report['scan_reading_correct_share']:.2%}")
    return path, report
