"""Progress bars and the summary table of the CSL commands."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from compgen.cli.common import err_console


@contextlib.contextmanager
def csl_progress() -> Iterator:
    """A callback progress(phase, done, total) drawing one bar per phase on stderr.
    The CSL loops report every few hundred items and run each phase to its end, so a
    phase's bar is filled when the next phase starts or the command returns."""
    bars = Progress(TextColumn("{task.description:>15}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err_console, transient=False)
    tasks: dict[str, int] = {}

    def finish() -> None:
        for task in bars.tasks:
            if task.total is not None and not task.finished:
                bars.update(task.id, completed=task.total)

    def update(phase: str, done: int, total: int | None) -> None:
        if phase not in tasks:
            finish()
            tasks[phase] = bars.add_task(phase, total=total)
        bars.update(tasks[phase], completed=done, total=total)

    update.bars = bars   # for tests: the bars' state
    with bars:
        yield update
        finish()


def _fmt(value) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.2%}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def print_csl_summary(console: Console, title: str, summary: dict, phases: list[dict]) -> None:
    table = Table(title=title)
    table.add_column("")
    table.add_column("value", justify="right")
    labels = {"train_pairs": "training pairs", "dev_pairs": "dev pairs", "test_pairs": "test pairs",
              "seed_rules": "seed rules (kept by induction)",
              "refinements": "refinement moves kept (--refine)", "rules": "rules",
              "train_coverage": "train derivable", "dev_coverage": "dev derivable",
              "test_coverage": "test derivable",
              "unparsed_train_pairs": "distinct train pairs without a parse",
              "rules_without_a_target_parse": "rules not sampled (target not in the target CFG)",
              "samples": "samples",
              "samples_without_a_logical_form": "samples dropped (no logical form)",
              "test_exact_match": "parser exact match (test)", "train_exact_match": "parser exact match (train)"}
    for key, label in labels.items():
        if key in summary:
            table.add_row(label, _fmt(summary[key]))
    console.print(table)
    timing = Table(title="phases")
    for column in ("phase", "seconds", "peak RSS MB"):
        timing.add_column(column, justify="left" if column == "phase" else "right")
    for row in phases:
        timing.add_row(row["phase"], f"{row['seconds']:.1f}", f"{row['peak_rss_mb']:,.0f}")
    timing.add_row("total", f"{sum(r['seconds'] for r in phases):.1f}", "")
    console.print(timing)
