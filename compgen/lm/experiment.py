"""The GECA language-model experiment (paper Table 4) for one corpus, end to end:

1. GECA with the ``lm`` preset (``lm-na`` for na) on the train split;
2. the augmented corpus = original training sentences, in order, then every synthesized
   sentence (geca-spec.md §9) -> ``augmented.txt``;
3. two 5-gram modified Kneser-Ney models with lmplz: ``base.bin`` (train split) and
   ``aug.bin`` (augmented corpus);
4. interpolation for every mix (token, sentence, geca), weight chosen on validation;
   test perplexity, paired t-test against the base model;
5. ``results.md`` and ``results.csv`` in the output folder.

``augmented`` replaces steps 1-2 with a given corpus file (one sentence per line, the
original training sentences included).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from compgen.augment.geca import geca_augment, load_training, make_config
from compgen.data.lm import LANGUAGES
from compgen.errors import SettingError, UserError, not_a_file
from compgen.io import atomic_open
from compgen.lm import perplexity as ppl
from compgen.lm.kenlm_tools import resolve_corpus, train_lm

# Test perplexity of the reference's logs (base, GECA at ratio 0.1), geca-spec.md §10.
REFERENCE = {"kin": (240.59, 239.08), "lao": (315.49, 313.13), "na": (45.38, 45.45),
             "tok": (44.29, 44.12)}


@dataclass
class LmExperiment:
    lang: str
    out_dir: Path
    rows: list[dict]                 # every mix and weight (see perplexity.evaluate_scores)
    summary: list[dict]              # one row per model: base, chosen weight of each mix
    stats: dict = field(default_factory=dict)
    seconds: float = 0.0


def geca_preset(lang: str) -> str:
    return "lm-na" if lang == "na" else "lm"


def write_augmented_corpus(lang: str, path: Path, seed: int, data_dir=None) -> dict:
    """Run GECA on ``lm/<lang>`` and write original + synthesized sentences to ``path``."""
    config = make_config(geca_preset(lang), {"seed": seed})
    config.validate()
    result = geca_augment(load_training(f"lm/{lang}", data_dir), config)
    original = result.train["y"].to_list()
    synthetic = result.table["y"].to_list()
    with atomic_open(path, "w", encoding="utf-8") as out:
        for words in original + synthetic:
            out.write(" ".join(words) + "\n")
    return {"preset": geca_preset(lang), "original_sentences": len(original),
            "synthetic_sentences": len(synthetic), "geca_seconds": result.stats.get("seconds")}


def run_experiment(lang: str, out_dir: str | Path | None = None, seed: int = 0, order: int = 5,
                   augmented: str | Path | None = None, weights: dict[str, list[float]] | None = None,
                   discount_fallback: bool = False, data_dir=None, log=print) -> LmExperiment:
    if lang not in LANGUAGES:
        raise UserError(f"unknown LM corpus '{lang}' (valid: {', '.join(LANGUAGES)})")
    start = time.perf_counter()
    out_dir = Path(out_dir or Path("runs") / "lm" / lang)
    out_dir.mkdir(parents=True, exist_ok=True)
    train = resolve_corpus(f"lm/{lang}", "train", data_dir)
    corpora = {split: resolve_corpus(f"lm/{lang}", split, data_dir) for split in ("val", "test")}

    stats: dict = {"lang": lang, "seed": seed, "order": order}
    if augmented is None:
        augmented = out_dir / "augmented.txt"
        log(f"GECA ({geca_preset(lang)} preset, seed {seed}) on lm/{lang} ...")
        stats.update(write_augmented_corpus(lang, augmented, seed, data_dir))
        log(f"  {stats['synthetic_sentences']} synthesized sentences -> {augmented}")
    else:
        augmented = Path(augmented)
        if not augmented.is_file():
            raise SettingError(f"`augmented` {augmented}: {not_a_file(augmented)}")
        stats["augmented_corpus"] = str(augmented)

    log(f"lmplz -o {order}: base and augmented models ...")
    base_model = train_lm(train, out_dir / "base.bin", order, discount_fallback)
    aug_model = train_lm(augmented, out_dir / "aug.bin", order, discount_fallback)

    log("scoring val/test and interpolating ...")
    # the models this experiment trained (base.bin, aug.bin): named by their files
    base_scores, aug_scores, oov = ppl.score_pair(base_model, aug_model, corpora, (None, None))
    stats["oov"] = {split: oov[split].describe(split) for split in ("val", "test")}
    rows, summary = [], []
    for mode in ppl.MIXES:
        grid = (weights or {}).get(mode) or list(ppl.DEFAULT_WEIGHTS[mode])
        result = ppl.evaluate_scores(base_scores, aug_scores, grid, mode)
        rows += result.rows
        if not summary:
            summary.append({"model": "base", **result.rows[0], "mix": "none"})
        summary.append({"model": f"{mode} mix", **result.best})
    stats["n_tokens"] = {"val": base_scores["val"].n_tokens, "test": base_scores["test"].n_tokens}
    seconds = time.perf_counter() - start
    stats["seconds"] = round(seconds, 2)
    experiment = LmExperiment(lang, out_dir, rows, summary, stats, seconds)
    write_results(experiment)
    return experiment


def results_markdown(exp: LmExperiment) -> str:
    ref = REFERENCE.get(exp.lang)
    lines = [f"# KenLM {exp.stats['order']}-gram perplexity with GECA: {exp.lang}", ""]
    if "synthetic_sentences" in exp.stats:
        lines.append(f"GECA preset `{exp.stats['preset']}`, seed {exp.stats['seed']}: "
                     f"{exp.stats['original_sentences']} original + "
                     f"{exp.stats['synthetic_sentences']} synthesized sentences.")
    else:
        lines.append(f"Augmented corpus: `{exp.stats['augmented_corpus']}`.")
    lines.append(f"Tokens (words + </s>): val {exp.stats['n_tokens']['val']}, "
                 f"test {exp.stats['n_tokens']['test']}. Wall time {exp.seconds:.1f} s.")
    if "oov" in exp.stats:
        lines.append("Unknown words, over the base model's vocabulary: "
                     + "; ".join(exp.stats["oov"].values()) + ".")
    if ref:
        lines.append(f"Reference test perplexity: base {ref[0]}, GECA (geca mix, ratio 0.1) {ref[1]}.")
    lines += ["", "## Summary (test perplexity; mixture weights chosen on val)", "",
              ppl.rows_markdown(exp.summary, ("model",) + ppl.COLUMNS[:-1]),
              "## Every weight", "",
              ("`weight` is the augmented model's weight for the token and sentence mixes and "
               "the reference's ratio r (aug weight r/(1+r)) for the geca mix; `t`, `p`: paired "
               "t-test of per-sentence test NLL against the base model; `*` = lowest val ppl."),
              "", ppl.rows_markdown(exp.rows)]
    return "\n".join(lines)


def _test_ppl(exp: LmExperiment, mode: str, weight: float | None = None) -> str:
    """Test perplexity of ``mode`` at ``weight``, or at the val-chosen weight (shown)."""
    rows = [r for r in exp.rows if r["mix"] == mode]
    if weight is None:
        row = next(r for r in rows if r["chosen"])
        return f"{row['test_ppl']:.2f} ({row['weight']:g})"
    row = next((r for r in rows if r["weight"] == weight), None)
    return f"{row['test_ppl']:.2f}" if row else "-"


def table4_markdown(experiments: list[LmExperiment]) -> str:
    """Paper Table 4 style: test perplexity per corpus, ours beside the reference's logs."""
    lines = [("| corpus | base | GECA, geca mix r=0.1 | geca mix (val) | token mix (val) "
              "| sentence mix (val) | reference base -> GECA | synthesized | seconds |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for exp in experiments:
        ref = REFERENCE.get(exp.lang)
        lines.append(f"| {exp.lang} | {exp.summary[0]['test_ppl']:.2f} | {_test_ppl(exp, 'geca', 0.1)} "
                     f"| {_test_ppl(exp, 'geca')} | {_test_ppl(exp, 'token')} "
                     f"| {_test_ppl(exp, 'sentence')} | {f'{ref[0]} -> {ref[1]}' if ref else '-'} "
                     f"| {exp.stats.get('synthetic_sentences', '-')} | {exp.seconds:.1f} |")
    return "\n".join(lines) + "\n"


def write_results(exp: LmExperiment) -> None:
    ppl.write_rows(exp.rows, csv=exp.out_dir / "results.csv")
    with atomic_open(exp.out_dir / "results.md", "w", encoding="utf-8") as out:
        out.write(results_markdown(exp))
    with atomic_open(exp.out_dir / "stats.json", "w", encoding="utf-8") as out:
        json.dump(exp.stats, out, indent=2)
