"""PNG figures: learning curves and attention heat-maps (the paper's Fig. 3 style), for the
predictor (one source) and for prototype generators (two prototypes and a copy strip).

matplotlib with the Agg backend (no display needed); files are written atomically.
"""

from __future__ import annotations

import io
import textwrap
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


def plot_generator_attention(attention: Sequence, row_labels: Sequence[str],
                             prototype_labels: Sequence[Sequence[str]], copy_prob,
                             png: str | Path, title: str | None = None) -> Path:
    """The paper's Fig. 3 for a prototype generator: one heat-map panel per prototype,
    side by side, rows = the generated tokens, cells = the attention weight of that step
    on that prototype position (``attention[k]`` is rows x len(prototype_labels[k])); a
    last strip shows each step's copy probability (1 - the write probability)."""
    panels = [np.asarray(m, dtype=float) for m in attention]
    copy = np.asarray(copy_prob, dtype=float).reshape(-1, 1)
    if len(panels) != len(prototype_labels) or not panels:
        raise ValueError(f"{len(panels)} attention matrices for {len(prototype_labels)} prototypes")
    for k, (m, labels) in enumerate(zip(panels, prototype_labels)):
        if m.shape != (len(row_labels), len(labels)):
            raise ValueError(f"prototype {k + 1}: matrix shape {m.shape} does not match "
                             f"{len(row_labels)} row and {len(labels)} column labels")
    if copy.shape[0] != len(row_labels):
        raise ValueError(f"{copy.shape[0]} copy probabilities for {len(row_labels)} rows")
    n_rows, n_cols = len(row_labels), sum(m.shape[1] for m in panels)
    fig, axes = plt.subplots(
        1, len(panels) + 1, figsize=(max(4.0, 0.3 * (n_cols + 2) + 2.5), max(2.5, 0.3 * n_rows + 1.5)),
        gridspec_kw={"width_ratios": [m.shape[1] for m in panels] + [1], "wspace": 0.12})
    for k, (ax, m, labels) in enumerate(zip(axes, panels, prototype_labels)):
        # one fixed 0..1 scale: attention rows are distributions, panels stay comparable
        image = ax.imshow(m, cmap="Blues", aspect="auto", vmin=0.0, vmax=1.0)
        ax.set_xticks(range(len(labels)), list(labels), rotation=60, ha="right", fontsize=8)
        ax.set_title(f"prototype {k + 1}", fontsize=9)
        if k == 0:
            ax.set_yticks(range(n_rows), list(row_labels), fontsize=8)
            ax.set_ylabel("generated")
        else:
            ax.set_yticks(range(n_rows), [""] * n_rows)
    strip = axes[-1]
    strip.imshow(copy, cmap="Oranges", aspect="auto", vmin=0.0, vmax=1.0)
    for row, value in enumerate(copy[:, 0]):
        strip.text(0, row, f"{value:.2f}", ha="center", va="center", fontsize=6,
                   color="white" if value > 0.6 else "black")
    strip.set_xticks([0], ["p(copy)"], rotation=60, ha="right", fontsize=8)
    strip.set_yticks(range(n_rows), [""] * n_rows)
    fig.colorbar(image, ax=list(axes), fraction=0.03, pad=0.02, label="attention")
    if title:  # a generated datum can be long: wrap it over the figure's width
        fig.suptitle(textwrap.fill(title, max(60, int(12 * fig.get_figwidth()))), fontsize=9)
    return _save(fig, png)
