#!/usr/bin/env python
"""Where a SCAN pipeline run's test errors are: exact match by how the held-out phrase is
used in the test command (``around right`` alone, ``around right twice``, ``around right
thrice``, each after ``turn`` or an action verb; for jump, ``jump``, ``jump twice`` ...), beside how many of the run's samples
use it that way and how many of those are correct SCAN pairs.

    .venv/bin/python scripts/scan_breakdown.py RUN_FOLDER [RUN_FOLDER ...] [--json]

A RUN_FOLDER is a pipeline seed folder (``runs/.../around_right-recomb2/seed0``) with a
predictor.pt and, for augmented rows, a samples.tsv. Prints a Markdown table per folder.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

from compgen.data.scan import load_scan_grammar
from compgen.data.sources import resolve_data_dir
from compgen.evaluate import evaluation_sets, evaluation_table, predictor_source
from compgen.io import read_samples_tsv
from compgen.sample_collection import scan_rare_phrase
from compgen.scoring import score_predictions

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


def breakdown(folder: Path, data_dir=None) -> dict:
    predict, meta, max_len = predictor_source(folder / "predictor.pt")
    data = meta["data"]
    if not data.startswith("scan/"):
        raise SystemExit(f"error: {folder}: trained on {data}, not a SCAN split")
    phrase = scan_rare_phrase(data.split("/", 1)[1], None).split()
    test = evaluation_sets(evaluation_table(data, data_dir))["test"]
    sources, refs = test["source"].to_list(), test["target"].to_list()
    correct = score_predictions(predict(sources), refs, False, max_len)["correct"]
    rows: dict[str, dict] = {}
    for source, ok in zip(sources, correct):
        row = rows.setdefault(use_of(source, phrase) or "(not used)",
                              {"test": 0, "test_correct": 0, "samples": 0, "samples_correct": 0})
        row["test"] += 1
        row["test_correct"] += ok
    samples_path = folder / "samples.tsv"
    if samples_path.is_file():
        grammar = load_scan_grammar(resolve_data_dir(data_dir))
        uses = Counter()
        for x, y in read_samples_tsv(samples_path):
            use = use_of(x, phrase) or "(not used)"
            uses[use, grammar.get(tuple(x)) == tuple(y)] += 1
        for (use, ok), count in uses.items():
            row = rows.setdefault(use, {"test": 0, "test_correct": 0, "samples": 0,
                                        "samples_correct": 0})
            row["samples"] += count
            row["samples_correct"] += count if ok else 0
    return {"folder": str(folder), "data": data, "rows": dict(sorted(rows.items()))}


def markdown(result: dict) -> str:
    lines = [f"{result['folder']} ({result['data']})", "",
             "| use in the command | test | exact match | samples | samples correct |",
             "|---|---:|---:|---:|---:|"]
    for use, r in result["rows"].items():
        match = f"{r['test_correct'] / r['test']:.3f}" if r["test"] else "–"
        right = f"{r['samples_correct']} ({r['samples_correct'] / r['samples']:.0%})" \
            if r["samples"] else "–"
        lines.append(f"| {use} | {r['test']} | {match} | {r['samples']} | {right} |")
    return "\n".join(lines)


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--json"]
    if not args:
        sys.exit(__doc__)
    for folder in map(Path, args):
        if not (folder / "predictor.pt").is_file():
            sys.exit(f"error: {folder}: no predictor.pt (a pipeline seed folder)")
    results = [breakdown(Path(folder)) for folder in args]
    if "--json" in sys.argv:
        print(json.dumps(results, indent=1))
    else:
        print("\n\n".join(markdown(r) for r in results))


if __name__ == "__main__":
    main()
