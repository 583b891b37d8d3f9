"""PNG figures: learning curves and attention heat-maps (the paper's Fig. 3 style).

matplotlib with the Agg backend (no display needed); files are written atomically.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import polars as pl

from compgen.errors import UserError
from compgen.io import atomic_open


def _save(fig, path: str | Path) -> Path:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)
    with atomic_open(path, "wb") as f:
        f.write(buffer.getvalue())
    return Path(path)


def plot_learning_curve(curve_csv: str | Path, png: str | Path, x: str = "epoch") -> Path:
    """A loss-curve CSV (column ``x`` plus any of ``train_loss``, ``dev_loss``,
    ``dev_exact_match``, ``dev_f1``, ``dev_ppl``) -> PNG: losses on the left axis, dev
    scores on the right one."""
    path = Path(curve_csv)
    if not path.is_file():
        raise UserError(f"{path}: no such loss-curve file")
    df = pl.read_csv(path)
    if x not in df.columns or df.height == 0:
        raise UserError(f"{path}: need a '{x}' column and at least one row")
    losses = [c for c in df.columns if c.endswith(("loss", "ppl"))]
    scores = [c for c in df.columns if c.startswith("dev_") and c not in losses]
    fig, left = plt.subplots(figsize=(6, 3.5))
    for c in losses:
        left.plot(df[x], df[c], marker=".", label=c)
    left.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    left.set_xlabel(x)
    left.set_ylabel("loss")
    handles, labels = left.get_legend_handles_labels()
    if scores:
        right = left.twinx()
        for k, c in enumerate(scores):
            right.plot(df[x], df[c], marker=".", linestyle="--", color=f"C{len(losses) + k}", label=c)
        right.set_ylabel("score")
        right.set_ylim(-0.02, 1.02)
        h2, l2 = right.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    if handles:
        left.legend(handles, labels, loc="center right", fontsize=8)
    left.set_title(path.stem)
    return _save(fig, png)


def plot_attention(matrix, row_labels: Sequence[str], col_labels: Sequence[str],
                   png: str | Path, title: str | None = None) -> Path:
    """Heat-map of a (rows x cols) weight matrix, e.g. decoder steps x source positions,
    labelled on both axes -> PNG."""
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape != (len(row_labels), len(col_labels)):
        raise ValueError(f"matrix shape {m.shape} does not match {len(row_labels)} row and "
                         f"{len(col_labels)} column labels")
    height, width = max(2.5, 0.3 * m.shape[0] + 1.2), max(3.0, 0.3 * m.shape[1] + 1.5)
    fig, ax = plt.subplots(figsize=(width, height))
    image = ax.imshow(m, cmap="Blues", aspect="auto", vmin=0.0, vmax=max(1e-9, float(m.max())))
    ax.set_xticks(range(m.shape[1]), list(col_labels), rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(m.shape[0]), list(row_labels), fontsize=8)
    fig.colorbar(image, ax=ax, fraction=0.04)
    if title:
        ax.set_title(title, fontsize=9)
    return _save(fig, png)
