"""Compare compgen's few-shot splits with JSON files written by the reference build
script (``seqs.hints-H.I.json``, ``splits.…``, ``neighborhoods.…`` and ``vocab.json`` in
one folder per language).

    .venv/bin/python scripts/analyze/compare_fewshot.py LANG REF_FOLDER [hints-4.0 ...]

Prints a Markdown table: for each split present in REF_FOLDER, whether the items (in
order), the split index lists and the neighbour pairs are identical.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from compgen.data import sigmorphon as sg
from compgen.data.sources import resolve_data_dir


def compare(
    lang: str, ref: Path, spec: str, data_dir: Path, cache: Path
) -> tuple[bool, bool, bool]:
    vocab = {i: tok for tok, i in json.loads((ref / "vocab.json").read_text()).items()}
    mine = sg.build_fewshot(lang, spec, data_dir, cache)
    seqs = json.loads((ref / f"seqs.{spec}.json").read_text())
    theirs = []
    for seq in seqs:
        tokens = [vocab[i] for i in seq][2:-1]  # drop <s>, <lang> and </s>
        k = tokens.index("<sep>")
        theirs.append((tokens[:k], "".join(tokens[k + 1 :])))
    same_items = len(theirs) == len(mine["rows"]) and all(
        left == list(lemma) + tags and form == f
        for (left, form), (lemma, f, tags) in zip(theirs, mine["rows"])
    )
    splits = json.loads((ref / f"splits.{spec}.json").read_text())
    same_splits = sorted(i for idx in splits.values() for i in idx) == list(
        range(len(mine["split"]))
    ) and all(mine["split"][i] == name for name, idx in splits.items() for i in idx)
    neighbors = json.loads((ref / f"neighborhoods.{spec}.json").read_text())
    same_neighbors = [neighbors.get(str(i)) for i in range(len(seqs))] == mine["neighbors"]
    return same_items, same_splits, same_neighbors


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    lang, ref = sys.argv[1], Path(sys.argv[2])
    if not (ref / "vocab.json").is_file():
        sys.exit(f"error: {ref / 'vocab.json'}: missing (the reference writes it after all builds)")
    specs = sys.argv[3:] or [s for s in sg.fewshot_specs() if (ref / f"seqs.{s}.json").is_file()]
    data_dir = resolve_data_dir(None)
    print("| language | split | items | splits | neighbours |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as cache:
        for spec in specs:
            flags = compare(lang, ref, spec, data_dir, Path(cache))
            print(
                f"| {lang} | {spec} | "
                + " | ".join("identical" if f else "DIFFERENT" for f in flags)
                + " |"
            )


if __name__ == "__main__":
    main()
