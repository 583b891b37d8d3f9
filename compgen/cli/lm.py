"""`compgen lm`: KenLM n-gram models, interpolation, perplexity."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.table import Table

from compgen.cli.common import Columns, DataDir, XField, YField, console, fields_of
from compgen.data.dataset import open_dataset
from compgen.errors import UserError
from compgen.io import atomic_open
from compgen.lm.experiment import run_experiment, table4_markdown
from compgen.lm.kenlm_tools import check_order, train_lm
from compgen.lm.perplexity import COLUMNS, MIXES, evaluate, format_cell, parse_weights, write_rows
from compgen.lm.side_corpus import train_side_lm

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


def _lm_rows_table(rows: list[dict], title: str, columns=None) -> Table:

    columns = columns or COLUMNS
    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="left" if col in ("mix", "model") else "right")
    for row in rows:
        table.add_row(*[format_cell(col, row[col]) for col in columns],
                      style="bold" if row.get("chosen") else None)
    return table


@commands.command("train")
def lm_train(
    corpus: str = typer.Argument(..., help="corpus file (one sentence per line) or lm/<lang> (its train split); with --side: a data set (its train split), data file or samples TSV"),
    output: Path = typer.Option(..., "-o", "--output", help="model to write: *.arpa (ARPA) or *.bin (build_binary)"),
    side: str | None = typer.Option(None, "--side", help="train on one side of example pairs: y | x | xy (x <sep> y)"),
    geca: str | None = typer.Option(None, "--geca", help="with --side: append GECA's synthesized pairs (preset, e.g. scan)"),
    order: int = typer.Option(5, "--order", help="n-gram order"),
    discount_fallback: bool = typer.Option(False, "--discount_fallback", "--discount-fallback",
                                           help="pass --discount_fallback to lmplz (tiny corpora)"),
    memory: str = typer.Option("500M", "--memory", help="lmplz sorting memory (-S); does not change the model"),
    seed: int = typer.Option(0, "--seed", help="GECA seed (--geca); lmplz is deterministic"),
    data_dir: Path | None = DataDir,
    x_field: str | None = XField,
    y_field: str | None = YField,
    columns: str | None = Columns,
) -> None:
    """Estimate a modified Kneser-Ney model with KenLM's lmplz."""
    if geca and not side:
        raise UserError("--geca needs --side (which side of the pairs the LM reads)")
    if not side and (x_field or y_field or columns):
        raise UserError("--x-field/--y-field/--columns read example pairs: they go with --side")
    check_order(order)
    start = time.perf_counter()
    if side is None:
        train_lm(corpus, output, order, discount_fallback, memory, data_dir)
    else:
        fields = fields_of(x_field, y_field, columns)
        dataset = open_dataset(corpus, data_dir, fields)
        counts = train_side_lm(dataset, side, output, order, discount_fallback, memory, geca,
                               seed, data_dir)
        console.print(f"{corpus}: side {side}, {counts['original']} pairs"
                      + (f" + {counts['synthetic']} GECA pairs ({geca})" if geca else ""),
                      highlight=False, markup=False)
    console.print(f"wrote {output} ({order}-gram, {time.perf_counter() - start:.1f} s)",
                  highlight=False, markup=False)


@commands.command("eval")
def lm_eval(
    base: Path = typer.Option(..., "--base", help="model trained on the original corpus (.arpa/.bin)"),
    val: str = typer.Option(..., "--val", help="validation corpus file or lm/<lang> (its val split)"),
    test: str = typer.Option(..., "--test", help="test corpus file or lm/<lang> (its test split)"),
    aug: Path | None = typer.Option(None, "--aug", help="model trained on the augmented corpus"),
    weights: str | None = typer.Option(None, "--weights", help="comma-separated aug weights (geca mix: ratios r); default per mix"),
    mix: str = typer.Option("token", "--mix", help="token (per-token mixture) | sentence (sentence-level mixture) | geca (reference formula)"),
    csv: Path | None = typer.Option(None, "--csv", help="write the table as CSV"),
    markdown: Path | None = typer.Option(None, "--markdown", help="write the table as Markdown"),
    seed: int = typer.Option(0, "--seed", help="accepted for uniformity; scoring is deterministic"),
    data_dir: Path | None = DataDir,
) -> None:
    """Perplexity of a model and of its interpolation with an augmented model.

    Both models are scored over the base model's vocabulary: a word unknown to the base
    model is <unk> for both; a base word the augmented model lacks gets a share of its
    <unk> probability, not all of it. Tokens = words + </s> per sentence; the weight is chosen on --val; paired t-test of
    per-sentence NLL against the base model on --test."""
    if mix not in MIXES:
        raise UserError(f"--mix must be one of {', '.join(MIXES)} (got {mix!r})")
    result = evaluate(base, val, test, aug, parse_weights(weights, mix), mix, data_dir)
    console.print(_lm_rows_table(result.rows, f"perplexity ({mix} mix; val {result.n_tokens['val']:,} "
                                              f"tokens, test {result.n_tokens['test']:,} tokens)"))
    best = result.best
    console.print(f"chosen on val: weight {best['weight']:g} -> test perplexity {best['test_ppl']:.2f} "
                  f"(base {result.rows[0]['test_ppl']:.2f})" if aug else
                  f"test perplexity {best['test_ppl']:.2f}", highlight=False, markup=False)
    for split, counts in (result.oov or {}).items():
        console.print(f"OOV {counts.describe(split)}", highlight=False, markup=False, soft_wrap=True)
    write_rows(result.rows, csv, markdown)


@commands.command("experiment")
def lm_experiment(
    langs: list[str] = typer.Argument(..., help="one or more of kin lao na tok"),
    out: Path = typer.Option(Path("runs/lm"), "-o", "--out", help="output root; each corpus goes to <out>/<lang>/"),
    augmented: Path | None = typer.Option(None, "--augmented", help="use this augmented corpus instead of running GECA (one corpus only)"),
    order: int = typer.Option(5, "--order", help="n-gram order"),
    discount_fallback: bool = typer.Option(False, "--discount_fallback", "--discount-fallback",
                                           help="pass --discount_fallback to lmplz"),
    seed: int = typer.Option(0, "--seed", help="GECA seed"),
    data_dir: Path | None = DataDir,
) -> None:
    """The GECA LM experiment: augment, two lmplz models, tuned interpolation.

    Writes augmented.txt, base.bin, aug.bin, results.md, results.csv, stats.json per corpus,
    and table4.md (all corpora, beside the reference figures) in the output root."""
    if augmented is not None and len(langs) != 1:
        raise UserError("--augmented needs exactly one corpus")
    start = time.perf_counter()
    experiments = []
    for lang in langs:
        exp = run_experiment(lang, out / lang, seed, order, augmented, None, discount_fallback,
                             data_dir, log=lambda msg: console.print(msg, highlight=False, markup=False))
        console.print(_lm_rows_table(exp.rows, f"lm/{lang}: test perplexity for every weight"))
        console.print(_lm_rows_table(exp.summary, f"lm/{lang}: summary (weights chosen on val)",
                                     ("model",) + COLUMNS[:-1]))
        console.print(f"lm/{lang}: wrote {exp.out_dir}/results.md, results.csv; "
                      f"wall time {exp.seconds:.1f} s", highlight=False, markup=False)
        experiments.append(exp)
    table = table4_markdown(experiments)
    with atomic_open(out / "table4.md", "w", encoding="utf-8") as handle:
        handle.write(table)
    console.print(table, highlight=False, markup=False, soft_wrap=True)
    console.print(f"total wall time {time.perf_counter() - start:.1f} s", highlight=False, markup=False)
