"""What samples of a generator trained on the user's own data are worth, judged by what
the data allow: how many are unique, novel (input and output absent from training), hold
a rare token, and -- where the user has one -- correct by an oracle.

The oracle is a command (``--oracle "python my_oracle.py"``): a program that reads
``x<TAB>y`` lines (tokens space-joined) on stdin and prints one ``1`` (correct) or ``0``
per line, in order. Any language works; it runs once per report, without a shell.
SCAN generators are judged by the SCAN grammar instead (``sample_collection.scan_quality``).
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from compgen.errors import SettingError
from compgen.neighborhoods.user_data import has_snapshot, rare_choice, snapshot_table
from compgen.runtimes.artifact import load_manifest
from compgen.sampling.run import shipped_training_table

ORACLE_TIMEOUT_S = 600


def oracle_command(oracle: str) -> list[str]:
    """``--oracle`` split into a command whose program exists (checked before sampling)."""
    try:
        args = shlex.split(oracle)
    except ValueError as exc:
        raise SettingError(f"`oracle` {oracle!r}: {exc}") from None
    if not args:
        raise SettingError("`oracle`: empty command")
    if shutil.which(args[0]) is None:
        raise SettingError(f"`oracle` {oracle!r}: no program '{args[0]}' (give a path or a "
                           "command on PATH)")
    return args


def run_oracle(oracle: str, pairs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[bool]:
    """The oracle's verdict on every pair; a UserError when it fails or answers out of form."""
    args = oracle_command(oracle)
    text = "".join(f"{' '.join(x)}\t{' '.join(y)}\n" for x, y in pairs)
    try:
        done = subprocess.run(args, input=text, capture_output=True, text=True,
                              timeout=ORACLE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SettingError(f"`oracle` {oracle!r}: {exc}") from None
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        raise SettingError(f"`oracle` {oracle!r}: exit status {done.returncode} {tail}".rstrip())
    answers = done.stdout.split()
    if len(answers) != len(pairs) or any(a not in ("0", "1") for a in answers):
        bad = next((f"line {i}: {a!r}" for i, a in enumerate(answers, 1) if a not in ("0", "1")),
                   f"{len(answers)} answers for {len(pairs)} lines")
        raise SettingError(f"`oracle` {oracle!r}: expected one 1 or 0 per input line ({bad})")
    return [a == "1" for a in answers]


def generator_training(source: Path) -> tuple[dict, pl.DataFrame | None]:
    """(config, training pairs table or None) of a checkpoint or export folder; the table
    only for generators trained on user data (the pairs they carry)."""
    source = Path(source)
    if source.is_dir():
        config = load_manifest(source).config
        table = shipped_training_table(source) if has_snapshot(config) else None
        return config, table
    # start-up: `compgen sample --backend onnx` loads no torch
    from compgen.training.checkpoint import load_checkpoint

    config = load_checkpoint(source, kind="recombine").config
    return config, (snapshot_table(config, str(source)) if has_snapshot(config) else None)


def check_report_options(source: Path, oracle: str | None) -> None:
    """Refuse ``--oracle`` before sampling where it cannot apply or cannot run."""
    if oracle is None:
        return
    oracle_command(oracle)
    _, table = generator_training(source)
    if table is None:
        raise SettingError("`oracle`: judges generators trained on your own data (SCAN samples "
                           "are judged by the SCAN grammar)")


def user_sample_report(source: Path, pairs: Sequence[tuple[Sequence[str], Sequence[str]]],
                       rare: str | None = None, oracle: str | None = None) -> dict | None:
    """Counts and shares of unique, novel, rare-holding and (with ``oracle``) correct
    samples; None unless ``source`` is a generator trained on user data."""
    config, table = generator_training(source)
    if table is None:
        return None
    rare_tokens = rare_choice(config, rare, table)
    samples = pl.DataFrame({"x": [" ".join(x) for x, _ in pairs],
                            "y": [" ".join(y) for _, y in pairs]},
                           schema={"x": pl.String, "y": pl.String})
    train = table.select(pl.col("x").list.join(" "), pl.col("y").list.join(" "))
    checked = samples.with_columns(
        unique=pl.struct("x", "y").is_first_distinct(),
        novel=~pl.col("x").is_in(train["x"].implode()) & ~pl.col("y").is_in(train["y"].implode()),
        rare=(pl.concat_list(pl.col("x").str.split(" "), pl.col("y").str.split(" "))
              .list.eval(pl.element().is_in(rare_tokens)).list.any()))
    total = checked.height
    report = {"total": total, "rare_tokens": rare_tokens,
              "unique": int(checked["unique"].sum()), "novel": int(checked["novel"].sum()),
              "with_rare": int(checked["rare"].sum())}
    if oracle is not None:
        report["correct"] = sum(run_oracle(oracle, pairs)) if total else 0
    for key in ("unique", "novel", "with_rare", "correct"):
        if key in report:
            report[f"{key}_share"] = report[key] / total if total else 0.0
    return report


def describe(report: dict) -> str:
    rare = ", ".join(report["rare_tokens"]) or "none"
    line = (f"unique {report['unique_share']:.1%}, novel {report['novel_share']:.1%}, "
            f"with a rare token ({rare}) {report['with_rare_share']:.1%}")
    if "correct" in report:
        line += f", correct by the oracle {report['correct_share']:.1%}"
    return line
