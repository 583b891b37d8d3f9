"""SCAN (Lake & Baroni 2018): ``IN: <command> OUT: <actions>`` lines."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from compgen.data.sources import embedded_text, named_data_text
from compgen.data.table import make_table
from compgen.errors import SettingError, UserError, not_a_file, read_text, where

LINE = re.compile(r"^IN: (.+?) OUT: (.+)$")

# split name -> (folder, file stem): files are <folder>/tasks_{train,test}_<stem>.txt
SPLITS = {
    "simple": ("simple_split", "simple"),
    "length": ("length_split", "length"),
    "jump": ("add_prim_split", "addprim_jump"),
    "turn_left": ("add_prim_split", "addprim_turn_left"),
    "around_right": ("template_split", "template_around_right"),
    "right": ("template_split", "template_right"),
    "opposite_right": ("template_split", "template_opposite_right"),
    "jump_around_right": ("template_split", "template_jump_around_right"),
}
EMBEDDED = {"jump", "around_right"}


def parse_scan(text: str, source: str = "<scan>") -> tuple[list[list[str]], list[list[str]]]:
    """Parse SCAN lines into (commands, actions); a malformed line is a UserError."""
    xs, ys = [], []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        m = LINE.match(line.strip())
        if m is None:
            raise UserError(f"{where(source, lineno)}: expected 'IN: <command> OUT: <actions>'")
        x, y = m.group(1).split(), m.group(2).split()
        if not x or not y or "OUT:" in x or "IN:" in y:
            raise UserError(f"{where(source, lineno)}: expected 'IN: <command> OUT: <actions>'")
        xs.append(x)
        ys.append(y)
    if not xs:
        raise UserError(f"{source}: no SCAN examples in file")
    return xs, ys


def read_scan_file(path: str | Path, split: str = "train", data_dir: Path | None = None) -> pl.DataFrame:
    """A SCAN file; with ``data_dir``, a named set's file there, checked against its sum."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: {not_a_file(path)}")
    text = read_text(path) if data_dir is None else named_data_text(path, data_dir)
    xs, ys = parse_scan(text, str(path))
    return make_table(xs, ys, split)


def load_scan(split: str, data_dir: Path) -> pl.DataFrame:
    """Train and test of a named SCAN split; jump and around_right fall back to the
    copies embedded in the package when the data folder does not have them."""
    if split not in SPLITS:
        raise UserError(f"unknown SCAN split '{split}' (valid: {', '.join(SPLITS)})")
    folder, stem = SPLITS[split]
    parts = []
    for part in ("train", "test"):
        name = f"tasks_{part}_{stem}.txt"
        path = data_dir / "scan" / folder / name
        if path.is_file():
            parts.append(read_scan_file(path, part, data_dir))
            continue
        text = embedded_text(name) if split in EMBEDDED else None
        if text is None:
            raise SettingError(f"{path}: missing; run 'compgen data fetch scan' or set `data_dir`")
        xs, ys = parse_scan(text, f"<embedded {name}>")
        parts.append(make_table(xs, ys, part))
    return pl.concat(parts)


def load_scan_grammar(data_dir: Path) -> dict[tuple[str, ...], tuple[str, ...]]:
    """Every SCAN command with its action sequence (``scan/tasks.txt``): the oracle used to
    judge whether a synthesized pair is a correct SCAN example."""
    path = data_dir / "scan" / "tasks.txt"
    if path.is_file():
        xs, ys = parse_scan(named_data_text(path, data_dir), str(path))
    else:  # the package embeds a copy (190 kB compressed), so the demo can judge samples
        xs, ys = parse_scan(embedded_text("tasks.txt"), "<embedded tasks.txt>")
    return {tuple(x): tuple(y) for x, y in zip(xs, ys)}


def scan_sample_report(pairs, train_table: pl.DataFrame, grammar: dict, primitive: str = "jump") -> dict:
    """Quality of synthesized SCAN pairs ``[(x tokens, y tokens), ...]``: counts and shares of
    novel inputs (not a training input), inputs that use ``primitive`` in a command absent
    from training, and pairs that are correct SCAN examples (``grammar[x] == y``, see
    ``load_scan_grammar``)."""
    samples = pl.DataFrame({"x": [" ".join(x) for x, _ in pairs], "y": [" ".join(y) for _, y in pairs]},
                           schema={"x": pl.String, "y": pl.String})
    train_x = train_table["x"].list.join(" ").unique()
    oracle = pl.DataFrame({"x": [" ".join(k) for k in grammar], "gold": [" ".join(v) for v in grammar.values()]},
                          schema={"x": pl.String, "gold": pl.String})
    checked = (samples.join(oracle, on="x", how="left", maintain_order="left")
               .with_columns(novel=~pl.col("x").is_in(train_x.implode()),
                             uses=pl.col("x").str.split(" ").list.contains(primitive),
                             correct=(pl.col("gold") == pl.col("y")).fill_null(False)))
    total = checked.height
    counts = {"total": total,
              "novel": int(checked["novel"].sum()),
              "uses_primitive_in_new_command": int((checked["novel"] & checked["uses"]).sum()),
              "correct": int(checked["correct"].sum())}
    for key in ("novel", "uses_primitive_in_new_command", "correct"):
        counts[f"{key}_share"] = counts[key] / total if total else 0.0
    return counts
