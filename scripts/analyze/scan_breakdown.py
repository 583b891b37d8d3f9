#!/usr/bin/env python
"""Where a SCAN pipeline run's test errors are: exact match by how the held-out phrase is
used in the test command (``around right`` alone, ``around right twice``, ``around right
thrice``, each after ``turn`` or an action verb; for jump, ``jump``, ``jump twice`` ...), beside how many of the run's samples
use it that way and how many of those are correct SCAN pairs.

    .venv/bin/python scripts/analyze/scan_breakdown.py RUN_FOLDER [RUN_FOLDER ...] [--json]
    .venv/bin/python scripts/analyze/scan_breakdown.py PREDICTOR.pt [PREDICTOR.pt ...]
    .venv/bin/python scripts/analyze/scan_breakdown.py SAMPLES.tsv --data scan/around_right [--most-probable N]

A RUN_FOLDER is a pipeline seed folder (``runs/.../around_right-recomb2/seed0``) with a
predictor.pt and, for augmented rows, a samples.tsv. A predictor checkpoint (such as
``predictor-ep30.pt`` of ``--keep-every``) is scored alone, its samples columns from the
samples TSV it was trained on. A samples TSV alone (``compgen sample -o``) gives the
samples' columns only, of all its samples or of the N most probable.
Prints a Markdown table per source.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from compgen.data.resample import scan_rare_phrase
from compgen.data.scan import load_scan_grammar
from compgen.data.sources import resolve_data_dir
from compgen.evaluation.evaluate import evaluation_sets, evaluation_table, predictor_source
from compgen.io import read_samples_tsv
from compgen.models.metrics import score_predictions

MODIFIERS = ("twice", "thrice")
DIRECTION_WORDS = ("around", "opposite")


def use_of(command: list[str], phrase: list[str]) -> str | None:
    """The phrase at its first occurrence with the repetition that follows it and, for a
    direction phrase (``around right``), whether its verb is ``turn`` (a turn only) or an
    action (``walk around right``: twice as long); None if the command lacks it."""
    n = len(phrase)
    for i in range(len(command) - n + 1):
        if command[i:i + n] == phrase:
            after = command[i + n] if i + n < len(command) else ""
            verb = []
            if phrase[0] in DIRECTION_WORDS and i > 0:
                verb = ["turn" if command[i - 1] == "turn" else "ACTION"]
            return " ".join(verb + phrase + ([after] if after in MODIFIERS else []))
    return None


def empty_row() -> dict:
    return {"test": 0, "test_correct": 0, "samples": 0, "samples_correct": 0}


def count_test(rows: dict, checkpoint: Path, data_dir=None) -> dict:
    """Test exact match per use, with a predictor checkpoint; returns its run description
    (data set, augment file)."""
    predict, meta, max_len = predictor_source(checkpoint)
    data = meta["data"]
    test = evaluation_sets(evaluation_table(data, data_dir))["test"]
    sources, refs = test["source"].to_list(), test["target"].to_list()
    correct = score_predictions(predict(sources), refs, False, max_len)["correct"]
    phrase = held_out_phrase(data)
    for source, ok in zip(sources, correct):
        row = rows.setdefault(use_of(source, phrase) or "(not used)", empty_row())
        row["test"] += 1
        row["test_correct"] += ok
    return meta


def count_samples(rows: dict, path: Path, data: str, most_probable: int | None,
                  data_dir=None) -> None:
    """Samples per use and how many are correct SCAN pairs; with ``most_probable`` only
    that many of the most probable (the first rows: samples TSVs are written best first)."""
    samples = read_samples_tsv(path)[:most_probable]
    grammar = load_scan_grammar(resolve_data_dir(data_dir))
    phrase = held_out_phrase(data)
    for x, y in samples:
        row = rows.setdefault(use_of(x, phrase) or "(not used)", empty_row())
        row["samples"] += 1
        row["samples_correct"] += grammar.get(tuple(x)) == tuple(y)


def held_out_phrase(data: str) -> list[str]:
    if not data.startswith("scan/"):
        raise SystemExit(f"error: {data}: not a SCAN split")
    return scan_rare_phrase(data.split("/", 1)[1], None).split()


def breakdown(path: Path, data: str | None, most_probable: int | None) -> dict:
    """A pipeline seed folder (test and samples.tsv), a predictor checkpoint (test and the
    samples it trained on) or a samples TSV (samples only)."""
    rows: dict[str, dict] = {}
    source = str(path)
    if path.is_dir() or path.suffix == ".pt":
        checkpoint = path / "predictor.pt" if path.is_dir() else path
        meta = count_test(rows, checkpoint, None)
        data = meta["data"]
        if path.is_dir():
            path = path / "samples.tsv"
        else:
            augment = meta.get("augment")
            path = Path(augment) if augment else None
        if path is None or not path.is_file():
            return {"source": source, "data": data, "rows": dict(sorted(rows.items()))}
        source = f"{checkpoint}, samples {path}"
    count_samples(rows, path, data, most_probable)
    return {"source": source, "data": data, "rows": dict(sorted(rows.items()))}


def markdown(result: dict) -> str:
    lines = [f"{result['source']} ({result['data']})", "",
             "| use in the command | test | exact match | samples | samples correct |",
             "|---|---:|---:|---:|---:|"]
    tested = any(r["test"] for r in result["rows"].values())
    for use, r in result["rows"].items():
        match = f"{r['test_correct'] / r['test']:.3f}" if r["test"] else "–"
        right = f"{r['samples_correct']} ({r['samples_correct'] / r['samples']:.0%})" \
            if r["samples"] else "–"
        lines.append(f"| {use} | {r['test'] if tested else '–'} | {match} | {r['samples']} | {right} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sources", nargs="+", type=Path,
                        help="pipeline seed folders (predictor.pt, samples.tsv), predictor "
                             "checkpoints or samples TSVs")
    parser.add_argument("--data", help="the SCAN split of samples TSVs, e.g. scan/around_right")
    parser.add_argument("--most-probable", type=int,
                        help="count only this many of a samples TSV's most probable samples")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    for path in args.sources:
        if path.is_dir() and not (path / "predictor.pt").is_file():
            sys.exit(f"error: {path}: no predictor.pt (a pipeline seed folder)")
        if not path.is_dir() and not path.is_file():
            sys.exit(f"error: {path}: no such folder or file")
        if path.is_file() and path.suffix != ".pt" and not args.data:
            sys.exit(f"error: {path}: a samples TSV needs --data (its SCAN split)")
    results = [breakdown(path, args.data, args.most_probable) for path in args.sources]
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        print("\n\n".join(markdown(r) for r in results))


if __name__ == "__main__":
    main()
