"""Tables and figures of the STEM-CORRUPT experiment from its result rows.

* accuracy per language x size x strategy, mean +- std over seeds;
* the paper's Table 1: UMT+LOSS - RANDOM (points), averaged over the sizes run;
* win counts: per (language, size) setting, the strategy with the best mean accuracy;
* a paired bootstrap of each strategy against RANDOM (same test rows and seeds);
* PNGs: accuracy vs subset size per strategy (one panel per language), and the most
  often selected tag bundles per strategy (the paper's Fig. 6).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np

BASELINE = "none"


def _groups(rows: Sequence[dict]) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["lang"], r["size"], r["strategy"])].append(r)
    return groups


def summary(rows: Sequence[dict]) -> list[dict]:
    out = []
    for (lang, size, strategy), group in sorted(_groups(rows).items()):
        acc = np.array([g["accuracy"] for g in group]) * 100
        out.append({"lang": lang, "size": size, "strategy": strategy, "seeds": len(acc),
                    "mean": float(acc.mean()), "std": float(acc.std(ddof=1)) if len(acc) > 1 else 0.0})
    return out


def paired_bootstrap(a: Sequence[Sequence[int]], b: Sequence[Sequence[int]], samples: int = 1000,
                     seed: int = 0) -> tuple[float, float]:
    """Mean accuracy difference (points) of a over b on the same test rows, and the share
    of bootstrap resamples of the rows in which a does not beat b (a one-sided p-value)."""
    x = np.asarray(a, dtype=np.float64).mean(0)   # per-row correctness averaged over seeds
    y = np.asarray(b, dtype=np.float64).mean(0)
    diff = x - y
    idx = np.random.default_rng(seed).integers(0, len(diff), size=(samples, len(diff)))
    resampled = diff[idx].mean(1)
    return float(diff.mean() * 100), float((resampled <= 0).mean())


def _seeds(n: int) -> str:
    return f"{n} seed" if n == 1 else f"{n} seeds"


def markdown(rows: Sequence[dict]) -> str:
    stats = summary(rows)
    by_key = {(s["lang"], s["size"], s["strategy"]): s for s in stats}
    strategies = sorted({s["strategy"] for s in stats if s["strategy"] != BASELINE})
    lines = ["| language | size | " + " | ".join(strategies) + " |",
             "|---|---:|" + "---:|" * len(strategies)]
    for lang in sorted({s["lang"] for s in stats}):
        base = by_key.get((lang, 0, BASELINE))
        if base:
            lines.append(f"| {lang} | 0 (gold only) | {base['mean']:.1f} ± {base['std']:.1f} "
                         f"({_seeds(base['seeds'])}) |" + " |" * (len(strategies) - 1))
        for size in sorted({s["size"] for s in stats if s["lang"] == lang and s["size"] > 0}):
            cells = []
            for strategy in strategies:
                s = by_key.get((lang, size, strategy))
                cells.append(f"{s['mean']:.1f} ± {s['std']:.1f} ({s['seeds']})" if s else "")
            lines.append(f"| {lang} | {size} | " + " | ".join(cells) + " |")
    comparisons = []
    groups = _groups(rows)
    for lang in sorted({s["lang"] for s in stats}):
        diffs, ps = [], []
        for size in sorted({s["size"] for s in stats if s["lang"] == lang and s["size"] > 0}):
            a = sorted(groups.get((lang, size, "umt+loss"), []), key=lambda r: r["seed"])
            b = sorted(groups.get((lang, size, "random"), []), key=lambda r: r["seed"])
            seeds = sorted({r["seed"] for r in a} & {r["seed"] for r in b})
            if not seeds:
                continue
            d, p = paired_bootstrap([r["correct"] for r in a if r["seed"] in seeds],
                                    [r["correct"] for r in b if r["seed"] in seeds])
            diffs.append(d)
            ps.append(f"{size}: {d:+.1f} (p={p:.2f}, {_seeds(len(seeds))})")
        if diffs:
            comparisons.append(f"* {lang}: {np.mean(diffs):+.1f} — " + "; ".join(ps))
    if comparisons:   # only when both strategies ran on the same seeds
        lines += ["", ("UMT+LOSS - RANDOM (points, mean over the sizes run; paired bootstrap "
                       "p = share of resamples where UMT+LOSS does not win):"), "", *comparisons]
    wins: Counter = Counter()
    for lang, size in {(s["lang"], s["size"]) for s in stats if s["size"] > 0}:
        cands = [s for s in stats if s["lang"] == lang and s["size"] == size]
        if len(cands) > 1:
            wins[max(cands, key=lambda s: s["mean"])["strategy"]] += 1
    if wins:
        lines += ["", "Wins (best mean accuracy per language x size setting): "
                  + ", ".join(f"{k} {v}" for k, v in wins.most_common())]
    return "\n".join(lines) + "\n"


def accuracy_figure(rows: Sequence[dict], out: Path) -> Path:
    # start-up: matplotlib (over half a second) loads only to plot
    import matplotlib

    matplotlib.use("Agg")
    # start-up: matplotlib (over half a second) loads only to plot
    import matplotlib.pyplot as plt

    stats = summary(rows)
    langs = sorted({s["lang"] for s in stats})
    fig, axes = plt.subplots(1, len(langs), figsize=(4.5 * len(langs), 3.5), squeeze=False)
    for ax, lang in zip(axes[0], langs, strict=True):
        for strategy in sorted({s["strategy"] for s in stats if s["lang"] == lang}):
            pts = sorted((s["size"], s["mean"], s["std"]) for s in stats
                         if s["lang"] == lang and s["strategy"] == strategy)
            if strategy == BASELINE:
                ax.axhline(pts[0][1], color="grey", linestyle=":", label="gold only")
                continue
            x, y, e = zip(*pts, strict=True)
            ax.errorbar(x, y, yerr=e, marker="o", capsize=3, label=strategy.upper())
        ax.set_xscale("log", base=2)
        ax.set_title(lang)
        ax.set_xlabel("synthetic examples selected")
        ax.set_ylabel("lemma-split exact match (%)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def tag_figure(selections: dict[str, list[str]], out: Path, top: int = 10) -> Path:
    """``selections``: strategy -> the tag bundles of every selected row (all seeds)."""
    # start-up: matplotlib (over half a second) loads only to plot
    import matplotlib

    matplotlib.use("Agg")
    # start-up: matplotlib (over half a second) loads only to plot
    import matplotlib.pyplot as plt

    names = sorted(selections)
    fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.8), squeeze=False)
    for ax, name in zip(axes[0], names, strict=True):
        common = Counter(selections[name]).most_common(top)
        total = max(len(selections[name]), 1)
        ax.barh([t for t, _ in common][::-1], [c / total * 100 for _, c in common][::-1])
        ax.set_title(name.upper())
        ax.set_xlabel("% of selected rows")
        ax.tick_params(axis="y", labelsize=6)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
