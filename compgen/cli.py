"""The ``compgen`` command line. Thin: every command parses options and calls a library
function that the tests call too. User mistakes print one ``error:`` line, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from compgen.errors import UserError

app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False,
                  help="Compositional data augmentation: GECA, R&R generators, KenLM.")
console = Console(width=max(120, Console().width))
err_console = Console(stderr=True)

DataDir = typer.Option(None, "--data-dir", help="data folder (default: $COMPGEN_DATA or ~/.cache/compgen/data)")

# ---------------------------------------------------------------- data
data_app = typer.Typer(no_args_is_help=True, help="List, fetch and describe data sets.")
app.add_typer(data_app, name="data")


@data_app.command("list")
def data_list() -> None:
    """Names of the data sets compgen knows."""
    from compgen.data import dataset_names

    for name in dataset_names():
        console.print(name)


@data_app.command("fetch")
def data_fetch(
    name: str = typer.Argument(..., help="scan | sigmorphon | lm | cogs"),
    mirror: Path | None = typer.Option(None, "--from", help="copy from this offline mirror instead of downloading"),
    data_dir: Path | None = DataDir,
) -> None:
    """Download a data set (or copy it from a mirror) and verify its sha256 sums."""
    from compgen.data.sources import default_data_dir, fetch

    target = data_dir or Path(__import__("os").environ.get("COMPGEN_DATA") or default_data_dir())
    written = fetch(name, target, mirror)
    console.print(f"{name}: {len(written)} files verified (sha256) into {target}")


@data_app.command("stats")
def data_stats(name: str = typer.Argument(..., help="data set name or file"),
               data_dir: Path | None = DataDir) -> None:
    """Counts, vocabulary sizes and lengths per split."""
    from compgen.data import load_dataset
    from compgen.data.stats import table_stats

    stats = table_stats(load_dataset(name, data_dir))
    table = Table(title=name)
    for col in stats.columns:
        table.add_column(col, justify="left" if col == "split" else "right")
    for row in stats.iter_rows():
        table.add_row(*[f"{v:,.1f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int)
                        else str(v) for v in row])
    console.print(table)


# ---------------------------------------------------------------- train
train_app = typer.Typer(no_args_is_help=True, help="Train generators and the conditional predictor.")
app.add_typer(train_app, name="train")


@train_app.command("predictor")
def train_predictor_cmd(
    data: str = typer.Option(..., "--data", help="data set name (scan/jump, sigmorphon/spanish/hints-4.0) or file"),
    config: str = typer.Option("seq2seq_scan", "--config", help="preset name (seq2seq_scan[_cpu], seq2seq_sig[_cpu]) or TOML file"),
    output: Path = typer.Option(..., "-o", "--output", help="checkpoint file to write (safetensors)"),
    augment: Path | None = typer.Option(None, "--augment", help="augmented samples TSV (x<TAB>y)"),
    p_aug: float | None = typer.Option(None, "--p-aug", help="probability of drawing an augmented example (default: reference value for the data set, else 0 = concatenate)"),
    epochs: int | None = typer.Option(None, "--epochs", help="override the preset's number of epochs"),
    label: str | None = typer.Option(None, "--label", help="system name in result tables (default: augment file stem or 'baseline')"),
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted run from OUTPUT"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    seed: int = typer.Option(0, "--seed"),
    data_dir: Path | None = DataDir,
) -> None:
    """Train the conditional seq2seq predictor on original (+ augmented) data."""
    import torch

    from compgen.train_seq2seq import train_predictor

    if threads is not None:
        if threads < 1:
            raise UserError("--threads must be >= 1")
        torch.set_num_threads(threads)
    summary = train_predictor(data, config, output, augment=augment, p_aug=p_aug, seed=seed,
                              data_dir=data_dir, epochs=epochs, resume=resume, label=label,
                              log=lambda line: console.print(line, highlight=False))
    console.print(f"wrote {summary['checkpoint']} ({summary['epochs']} epochs, {summary['n_train']:,} "
                  f"train + {summary['n_augmented']:,} augmented, p_aug {summary['p_aug']}, "
                  f"dev exact match {summary['dev_exact_match']:.4f}, {summary['seconds']} s); "
                  f"curve {summary['curve']}", highlight=False)


# ---------------------------------------------------------------- evaluate
@app.command("evaluate")
def evaluate_cmd(
    models: list[Path] = typer.Argument(..., help="predictor or generator checkpoint(s); several = seeds, reported as mean ± std"),
    data: str | None = typer.Option(None, "--data", help="data set (default: the one the model was trained on)"),
    output: Path | None = typer.Option(None, "-o", "--output", help="results CSV (also writes <stem>.summary.csv and <stem>.md); default: print only"),
    plots: Path | None = typer.Option(None, "--plots", help="folder for learning-curve and attention PNGs (generators: the attention over both prototypes, the paper's Fig. 3)"),
    direct: bool = typer.Option(False, "--direct", help="direct inference with a recomb-2 SCAN generator (paper App. E): exact match, top-3 match, F1"),
    limit: int | None = typer.Option(None, "--limit", help="--direct: only the first N unique test inputs"),
    beam: int = typer.Option(0, "--beam", help="beam width (0 = greedy, as the reference)"),
    predictions: Path | None = typer.Option(None, "--predictions", help="per-example TSV (one model only)"),
    batch_size: int = typer.Option(256, "--batch-size"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    seed: int = typer.Option(0, "--seed", help="seeds the generator's test-time dropout and the random prototype fallbacks; unused by the predictor"),
    data_dir: Path | None = DataDir,
) -> None:
    """Exact match and morphology F1 (FUT / PST / FUT+PST / OTHER, all and NOVEL) of
    predictors; direct inference and attention figures of generators."""
    import torch

    from compgen.evaluate import (
        aggregate,
        evaluate_predictor,
        markdown_table,
        write_plots,
        write_results,
    )

    if batch_size < 1:
        raise UserError("--batch-size must be >= 1")
    if beam < 0:
        raise UserError("--beam must be >= 0")
    if limit is not None and (limit < 1 or not direct):
        raise UserError("--limit takes N >= 1 and goes with --direct")
    if predictions and len(models) > 1:
        raise UserError("--predictions takes one model")
    if threads is not None:
        torch.set_num_threads(max(1, threads))
    torch.manual_seed(seed)
    rows = []
    for model in models:
        if _checkpoint_kind(model) == "recombine":
            rows += _evaluate_generator(model, data, plots, direct, limit, predictions,
                                        batch_size, seed, data_dir)
            continue
        if direct:
            raise UserError(f"{model}: --direct needs a generator checkpoint (compgen train generator)")
        rows += evaluate_predictor(model, data, data_dir, beam, batch_size, predictions)
        if plots:
            for path in write_plots(model, plots, data, data_dir):
                console.print(f"plot {path}", highlight=False)
    if not rows:
        return
    console.print(markdown_table(aggregate(rows)), highlight=False, markup=False)
    for row in rows:
        if "top3_match" in row:
            console.print(f"{row['model']}: top-3 match {row['top3_match']:.4f}", highlight=False)
    if output:
        paths = write_results(rows, output)
        console.print(f"wrote {paths['csv']}, {paths['summary']}, {paths['markdown']}", highlight=False)


def _checkpoint_kind(path: Path) -> str:
    """The kind stored in a checkpoint: "recombine" (generator), "seq2seq" (predictor)."""
    from compgen.train import load_checkpoint

    return load_checkpoint(path).kind


def _evaluate_generator(model: Path, data: str | None, plots: Path | None, direct: bool,
                        limit: int | None, predictions: Path | None, batch_size: int,
                        seed: int, data_dir: Path | None) -> list[dict]:
    """A generator checkpoint: its figures (--plots) and direct-inference row (--direct)."""
    from compgen.direct_inference import evaluate_direct
    from compgen.evaluate import write_generator_plots

    if not (direct or plots):
        raise UserError(f"{model}: a generator checkpoint; evaluate it with --direct "
                        "(direct inference) and/or --plots DIR (attention figure)")
    if plots:
        for path in write_generator_plots(model, plots, data_dir, seed=seed):
            console.print(f"plot {path}", highlight=False)
    if not direct:
        return []
    return evaluate_direct(model, data, data_dir, limit, batch_size, seed, predictions,
                           log=lambda line: err_console.print(line, highlight=False, markup=False))


# ---------------------------------------------------------------- train generator / sample
@train_app.command("generator")
def train_generator_cmd(
    data: str = typer.Option(..., "--data", help="scan/<split> or sigmorphon/<lang>/hints-<h>.<i>"),
    config: str = typer.Option("recombine_scan", "--config", help="preset (recombine_scan[_cpu], recombine_sig[_cpu], proto_*, rnnlm_*) or TOML file"),
    output: Path = typer.Option(..., "-o", "--output", help="checkpoint file to write (safetensors, self-describing)"),
    nproto: int | None = typer.Option(None, "--nproto", help="0, 1 or 2 prototypes"),
    epochs: int | None = typer.Option(None, "--epochs"),
    vae: bool | None = typer.Option(None, "--vae/--no-vae", help="vMF latent on/off"),
    copy: bool | None = typer.Option(None, "--copy/--no-copy", help="copying on/off"),
    hidden: int | None = typer.Option(None, "--hidden", help="LSTM hidden size H"),
    embed: int | None = typer.Option(None, "--embed", help="embedding size E"),
    attdim: int | None = typer.Option(None, "--attdim", help="attention size A"),
    batch_size: int | None = typer.Option(None, "--batch-size"),
    lr: float | None = typer.Option(None, "--lr"),
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted run from OUTPUT (with --epochs: train a finished run longer)"),
    max_steps: int | None = typer.Option(None, "--max-steps", help="stop after this many updates (resumable)"),
    time_budget: float | None = typer.Option(None, "--time-budget", help="stop after this many seconds (resumable)"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    quiet: bool = typer.Option(False, "--quiet", help="log lines instead of a progress bar"),
    seed: int | None = typer.Option(None, "--seed"),
    data_dir: Path | None = DataDir,
) -> None:
    """Train an R&R generator (recomb-0/1/2, optional VAE) on prototype neighbourhoods."""
    from compgen.train import apply_overrides, load_preset, train_generator

    for name, value, low in (("--nproto", nproto, 0), ("--epochs", epochs, 1), ("--hidden", hidden, 1),
                             ("--embed", embed, 1), ("--attdim", attdim, 1),
                             ("--batch-size", batch_size, 1), ("--threads", threads, 1),
                             ("--max-steps", max_steps, 0)):
        if value is not None and value < low:
            raise UserError(f"{name} must be >= {low}")
    if nproto is not None and nproto > 2:
        raise UserError("--nproto must be 0, 1 or 2")
    cfg = apply_overrides(load_preset(config), {
        "model.nproto": nproto, "model.vae": vae, "model.copy": copy, "model.hidden": hidden,
        "model.embed": embed, "model.attdim": attdim, "train.epochs": epochs,
        "train.batch_size": batch_size, "train.lr": lr, "train.seed": seed, "train.threads": threads})
    result = train_generator(cfg, data, output, data_dir=data_dir, resume=resume,
                             epochs=epochs, max_steps=max_steps, time_budget=time_budget, progress=not quiet,
                             log=lambda line: console.print(line, highlight=False, markup=False))
    state = "finished" if result.finished else "stopped (resume with --resume)"
    ppl = f", dev ppl {result.dev_ppl:.4f}" if result.dev_ppl else ""
    console.print(f"wrote {result.path}: {state} at step {result.steps} ({result.epochs_done:.2f} epochs"
                  f"{ppl}, {result.examples_per_s:.1f} examples/s); curve {result.curve_path}",
                  highlight=False, markup=False)


@app.command("sample")
def sample_cmd(
    checkpoint: Path = typer.Argument(..., help="generator checkpoint (compgen train generator -o ...) or export folder (compgen export)"),
    n: int | None = typer.Option(None, "--n", help="samples to keep (default: the preset's)"),
    strategy: str | None = typer.Option(None, "--strategy", help="beam | temperature | greedy | mixed"),
    temperature: float | None = typer.Option(None, "--temperature", "-T"),
    resample: str | None = typer.Option(None, "--resample", help="none | rare (rare-token rule)"),
    rare: str | None = typer.Option(None, "--rare", help="SCAN: word/n-gram the input must contain; SIG: tags (PST,FUT) or auto"),
    nsamples: int | None = typer.Option(None, "--nsamples", help="accepted candidates before keeping the N most probable"),
    max_rounds: int | None = typer.Option(None, "--max-rounds", help="batches decoded at most when the filter accepts few candidates (default: the preset's, else 200)"),
    rare_prototypes: bool | None = typer.Option(None, "--rare-prototypes/--all-prototypes", help="SCAN with --resample rare: draw only prototype tuples that contain every word of --rare between them (default: the preset's, else all)"),
    batch_size: int | None = typer.Option(None, "--batch-size"),
    output: Path | None = typer.Option(None, "-o", "--output", help="samples TSV (x<TAB>y<TAB>logprob)"),
    backend: str | None = typer.Option(None, "--backend", help="onnx | torchscript | cpp (export folders; default onnx) | torch (eager PyTorch; default for checkpoints)"),
    test_dropout: bool | None = typer.Option(None, "--test-dropout/--no-test-dropout", help="dropout on the decoder state while sampling (default: the checkpoint's outdrop_test)"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    seed: int = typer.Option(0, "--seed"),
    data_dir: Path | None = DataDir,
) -> None:
    """Sample unique, novel synthetic data from a generator (optionally rare-token resampled)."""
    from compgen.runtime.sampler import BACKENDS, sample_exported
    from compgen.sampling import check_strategy, sample_generator

    exported = checkpoint.is_dir()
    backend = backend or ("onnx" if exported else "torch")
    if backend not in BACKENDS:
        raise UserError(f"--backend {backend}: unknown (valid: {', '.join(BACKENDS)})")
    if not exported and backend != "torch":
        raise UserError(f"--backend {backend} runs on an export folder: "
                        f"first run 'compgen export {checkpoint}'")
    if exported and test_dropout:
        raise UserError("--test-dropout: exported graphs are deterministic; use --backend torch")
    if strategy is not None:
        check_strategy(strategy)
    for name, value in (("--n", n), ("--nsamples", nsamples), ("--batch-size", batch_size),
                        ("--threads", threads), ("--max-rounds", max_rounds)):
        if value is not None and value < 1:
            raise UserError(f"{name} must be >= 1")
    if exported:
        run = sample_exported(checkpoint, n, backend=backend, strategy=strategy,
                              temperature=temperature, resample=resample, rare=rare,
                              nsamples=nsamples, batch_size=batch_size, seed=seed, out=output,
                              data_dir=data_dir, threads=threads, max_rounds=max_rounds,
                              rare_prototypes=rare_prototypes,
                              log=lambda line: err_console.print(line, highlight=False, markup=False))
    else:
        run = sample_generator(checkpoint, n, strategy=strategy, temperature=temperature,
                               resample=resample, rare=rare, nsamples=nsamples,
                               batch_size=batch_size, seed=seed, out=output, data_dir=data_dir,
                               threads=threads, test_dropout=test_dropout, max_rounds=max_rounds,
                               rare_prototypes=rare_prototypes,
                               log=lambda line: err_console.print(line, highlight=False, markup=False))
    if output is None:
        for s in run.samples:
            console.print(f"{' '.join(s.x)}\t{' '.join(s.y)}\t{s.logprob:.4f}", highlight=False,
                          markup=False, soft_wrap=True)
    console.print(f"{len(run.samples)} samples in {run.seconds:.1f} s"
                  + (f" -> {output}" if output else ""), highlight=False, markup=False)
    from compgen.sampling import scan_quality

    quality = scan_quality(run, data_dir)
    if quality:
        console.print(f"novel {quality['novel_share']:.1%}, '{quality['primitive']}' in a new "
                      f"command {quality['uses_primitive_in_new_command_share']:.1%}, correct SCAN "
                      f"pairs {quality['correct_share']:.1%}", highlight=False, markup=False)


# ---------------------------------------------------------------- augment
augment_app = typer.Typer(no_args_is_help=True, help="Synthesize training data by recombination (GECA).")
app.add_typer(augment_app, name="augment")


def _count_option(name: str, value: str | None, words: tuple[str, ...]):
    """Parse an integer option that also accepts words meaning 'no limit' (-> "unlimited")."""
    if value is None:
        return None
    if value.lower() in words:
        return "unlimited"
    try:
        return int(value)
    except ValueError:
        raise UserError(f"{name} must be an integer or {' / '.join(words)} (got {value!r})") from None


@augment_app.command("geca")
def augment_geca(
    data: str = typer.Argument(..., help="data set name (scan/jump, lm/kin, cogs, ...) or data file; its train split is used"),
    output: Path = typer.Option(..., "-o", "--output", help="samples TSV to write (x<TAB>y)"),
    preset: str | None = typer.Option(None, "--preset", help="scan | lm | lm-na | semparse (options below override it)"),
    concat: bool = typer.Option(False, "--concat", help="write the training examples first, then the synthesized ones"),
    wug_limit: str | None = typer.Option(None, "--wug-limit", help="keep spans whose n-gram count is <= this; 'none' = no limit"),
    wug_size: int | None = typer.Option(None, "--wug-size", help="max tokens per span"),
    wug_count: int | None = typer.Option(None, "--wug-count", help="max spans per fragment (1-3)"),
    variants: str | None = typer.Option(None, "--variants", help="fragments tried per template, or 'all'"),
    n_sample: str | None = typer.Option(None, "--n-sample", help="max synthesized examples, or 'all'"),
    max_comp_len: str | None = typer.Option(None, "--max-comp-len", help="skip examples with len(x)+1+len(y) >= this; 'none'"),
    dedup: bool | None = typer.Option(None, "--dedup/--no-dedup", help="deduplicate training pairs first"),
    output_only: bool | None = typer.Option(None, "--output-only/--no-output-only", help="language modelling: ignore the input side"),
    template_sim: str | None = typer.Option(None, "--template-sim", help="none (whole template) | window"),
    sim_window_size: int | None = typer.Option(None, "--sim-window-size", help="tokens each side of a hole (window)"),
    reference_split: bool | None = typer.Option(None, "--reference-split/--no-reference-split", help="hold out the reference's 640 SCAN validation examples (default: on for --preset scan on scan/*)"),
    reference_offsets: bool | None = typer.Option(None, "--reference-offsets/--no-reference-offsets", help="third span searched from the reference's start position (default on)"),
    seed: int | None = typer.Option(None, "--seed"),
    data_dir: Path | None = DataDir,
) -> None:
    """GECA: put fragments into templates that share an environment; write novel examples."""
    import resource
    import time

    from compgen.augment.geca import augment_file, make_config

    limits = {"wug_limit": _count_option("--wug-limit", wug_limit, ("none",)),
              "variants": _count_option("--variants", variants, ("all",)),
              "n_sample": _count_option("--n-sample", n_sample, ("all", "none")),
              "max_comp_len": _count_option("--max-comp-len", max_comp_len, ("none",))}
    overrides = {"wug_size": wug_size, "wug_count": wug_count, "dedup": dedup, "output_only": output_only,
                 "template_sim": template_sim, "sim_window_size": sim_window_size, "seed": seed,
                 "reference_offsets": reference_offsets}
    cfg = make_config(preset, {**overrides, **{k: v for k, v in limits.items() if v != "unlimited"}},
                      data, reference_split)
    for key, value in limits.items():
        if value == "unlimited":
            setattr(cfg, key, None)
    cfg.validate()
    start = time.perf_counter()
    with console.status("GECA: extracting templates and fragments ...") as status:
        result = augment_file(data, output, cfg, concat=concat, data_dir=data_dir,
                              progress=lambda msg: status.update(f"GECA: {msg}"))
    s = result.stats
    table = Table(title=f"GECA {Path(data).name}" + (f" (preset {preset})" if preset else ""))
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [("examples in", s["examples_in"]), ("training examples", s["training_examples"]),
            ("templates (distinct)", s["templates"]), ("fragments (distinct)", s["fragments"]),
            ("templates that can take part", s["active_templates"]), ("proposals", s["proposals"]),
            ("synthesized", s["synthesized"]), ("templates used", s["templates_used"]),
            ("fragments used", s["fragments_used"]), ("rows written", s["rows_written"])]
    for name, value in rows:
        table.add_row(name, f"{value:,}")
    table.add_row("time", f"{time.perf_counter() - start:.1f} s")
    table.add_row("peak memory", f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")
    console.print(table)
    console.print(f"wrote {output}", highlight=False, markup=False)


# ---------------------------------------------------------------- lm
lm_app = typer.Typer(no_args_is_help=True, help="KenLM n-gram models: lmplz, interpolation, perplexity.")
app.add_typer(lm_app, name="lm")


def _lm_rows_table(rows: list[dict], title: str, columns=None) -> Table:
    from compgen.lm.perplexity import COLUMNS, format_cell

    columns = columns or COLUMNS
    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="left" if col in ("mix", "model") else "right")
    for row in rows:
        table.add_row(*[format_cell(col, row[col]) for col in columns],
                      style="bold" if row.get("chosen") else None)
    return table


@lm_app.command("train")
def lm_train(
    corpus: str = typer.Argument(..., help="corpus file (one sentence per line) or lm/<lang> (its train split)"),
    output: Path = typer.Option(..., "-o", "--output", help="model to write: *.arpa (ARPA) or *.bin (build_binary)"),
    order: int = typer.Option(5, "--order", help="n-gram order"),
    discount_fallback: bool = typer.Option(False, "--discount_fallback", "--discount-fallback",
                                           help="pass --discount_fallback to lmplz (tiny corpora)"),
    memory: str = typer.Option("500M", "--memory", help="lmplz sorting memory (-S); does not change the model"),
    seed: int = typer.Option(0, "--seed", help="accepted for uniformity; lmplz is deterministic"),
    data_dir: Path | None = DataDir,
) -> None:
    """Estimate a modified Kneser-Ney model with KenLM's lmplz."""
    import time

    from compgen.lm.kenlm_tools import train_lm

    start = time.perf_counter()
    train_lm(corpus, output, order, discount_fallback, memory, data_dir)
    console.print(f"wrote {output} ({order}-gram, {time.perf_counter() - start:.1f} s)",
                  highlight=False, markup=False)


@lm_app.command("eval")
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

    Tokens = words + </s> per sentence; the weight is chosen on --val; paired t-test of
    per-sentence NLL against the base model on --test."""
    from compgen.lm.perplexity import MIXES, evaluate, parse_weights, write_rows

    if mix not in MIXES:
        raise UserError(f"--mix must be one of {', '.join(MIXES)} (got {mix!r})")
    result = evaluate(base, val, test, aug, parse_weights(weights, mix), mix, data_dir)
    console.print(_lm_rows_table(result.rows, f"perplexity ({mix} mix; val {result.n_tokens['val']:,} "
                                              f"tokens, test {result.n_tokens['test']:,} tokens)"))
    best = result.best
    console.print(f"chosen on val: weight {best['weight']:g} -> test perplexity {best['test_ppl']:.2f} "
                  f"(base {result.rows[0]['test_ppl']:.2f})" if aug else
                  f"test perplexity {best['test_ppl']:.2f}", highlight=False, markup=False)
    write_rows(result.rows, csv, markdown)


@lm_app.command("experiment")
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
    import time

    from compgen.io import atomic_open
    from compgen.lm.experiment import run_experiment, table4_markdown
    from compgen.lm.perplexity import COLUMNS

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

# ---------------------------------------------------------------- export
@app.command("export")
def export_cmd(
    checkpoint: Path = typer.Argument(..., help="generator or predictor checkpoint (.pt, self-describing)"),
    output: Path | None = typer.Option(None, "--output", "-o", help="export folder (default: exported/<checkpoint name>)"),
    parity_sets: int = typer.Option(256, "--parity-sets", help="prototype sets (generator) or test sources (predictor) the parity check decodes"),
    cpp: bool = typer.Option(True, "--cpp/--no-cpp", help="also build the C++ runner and check it (generators only)"),
    seed: int = typer.Option(0, "--seed", help="seed of the stored prototype order"),
    data_dir: Path | None = DataDir,
) -> None:
    """Export to TorchScript + ONNX, validated against the eager model before writing."""
    from compgen.export import export_checkpoint
    from compgen.runtime.cpp import build_runner

    if parity_sets < 1:
        raise UserError("--parity-sets must be >= 1")
    # the C++ runner only runs generators: don't build it for a predictor
    is_generator = _checkpoint_kind(checkpoint) == "recombine"
    binary = build_runner(log=err_console.print) if cpp and is_generator else None
    manifest = export_checkpoint(checkpoint, output, parity_sets=parity_sets, seed=seed,
                                 data_dir=data_dir, cpp_binary=binary, log=err_console.print)
    parity = manifest["parity"]
    checked = (f"{parity['sets']} prototype sets" if is_generator
               else f"{parity['sources']} {parity['split']} sources")
    table = Table(title=f"parity on {checked} (log-prob tolerance {parity['tolerance']:g})")
    for col in ("backend", "greedy identical", "beam identical", "max |Δ log p|"):
        table.add_column(col)
    for name, f in parity["backends"].items():
        table.add_row(name, str(f.get("greedy_identical", "")), str(f.get("beam_identical", "—")),
                      f"{f['max_abs_logp_diff']:.2e}" if "max_abs_logp_diff" in f else "—")
    console.print(table)
    folder = output or Path("exported") / checkpoint.stem
    console.print(f"wrote {folder} ({', '.join(sorted(manifest['files']))}) "
                  f"in {manifest['export_seconds']:.1f} s")


# ---------------------------------------------------------------- pipeline
@app.command("pipeline")
def pipeline_cmd(
    name: str | None = typer.Argument(None, help="run name, e.g. jump-recomb2, around_right-baseline, swahili-h8-recomb1 (--list shows all)"),
    seeds: str = typer.Option("0", "--seeds", help="comma-separated seeds, or a range 0-4 (SIGMORPHON: the seed is the split index)"),
    root: Path = typer.Option(Path("runs/pipeline"), "--root", help="folder of the runs and of results.csv / results.md"),
    size: str = typer.Option("cpu", "--size", help="cpu (the *_cpu presets) | reference (the reference's sizes)"),
    generator_config: str | None = typer.Option(None, "--generator-config", help="generator preset or TOML file (default: by --size)"),
    predictor_config: str | None = typer.Option(None, "--predictor-config", help="predictor preset or TOML file (default: by --size)"),
    generator_epochs: int | None = typer.Option(None, "--generator-epochs", help="override the generator preset's epochs"),
    generator_steps: int | None = typer.Option(None, "--generator-steps", help="stop generator training after this many updates"),
    n: int | None = typer.Option(None, "--n", help="samples to keep (default: the generator preset's)"),
    nsamples: int | None = typer.Option(None, "--nsamples", help="accepted candidates before keeping the N most probable (default: the preset's ratio, e.g. 500 for 400)"),
    max_rounds: int | None = typer.Option(None, "--max-rounds", help="sampling: batches decoded at most when resampling accepts few candidates (default: the preset's, else 200)"),
    rare_prototypes: bool | None = typer.Option(None, "--rare-prototypes/--all-prototypes", help="SCAN rows with resampling: draw only prototype tuples that contain every word of the rare phrase between them (default: all, as the reference)"),
    test_dropout: bool | None = typer.Option(None, "--test-dropout/--no-test-dropout", help="dropout on the generator's decoder state while sampling (default: the preset's outdrop_test); --n, --nsamples, --max-rounds, --rare-prototypes and this apply when samples.tsv is made, so compare settings under separate --root folders"),
    predictor_epochs: int | None = typer.Option(None, "--predictor-epochs", help="override the predictor preset's epochs"),
    p_aug: float | None = typer.Option(None, "--p-aug", help="predictor: probability of drawing an augmented example, 0 = concatenate (default: the run's, e.g. 0.01 for jump); a predictor trained with another value is retrained"),
    backend: str = typer.Option("torch", "--backend", help="sampling backend: torch (eager) | onnx | torchscript | cpp (export first)"),
    direct_limit: int | None = typer.Option(None, "--direct-limit", help="direct inference: score the first N test inputs only"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    list_runs: bool = typer.Option(False, "--list", help="list the runs and exit"),
    data_dir: Path | None = DataDir,
) -> None:
    """Run one row of the paper's tables (augment -> predictor -> evaluation) for each seed;
    resumes from what an earlier call left behind and appends to ROOT/results.csv."""
    from compgen.evaluate import aggregate, markdown_table
    from compgen.pipeline import RUNS, PipelineOptions, run_pipeline

    if list_runs or name is None:
        for run_name, run in RUNS.items():
            console.print(f"{run_name:32s} {run.label:28s} {run.data}", highlight=False, markup=False)
        return
    for option, value in (("--generator-epochs", generator_epochs), ("--n", n), ("--nsamples", nsamples),
                          ("--max-rounds", max_rounds), ("--generator-steps", generator_steps),
                          ("--predictor-epochs", predictor_epochs), ("--threads", threads),
                          ("--direct-limit", direct_limit)):
        if value is not None and value < 1:
            raise UserError(f"{option} must be >= 1")
    if p_aug is not None and not 0.0 <= p_aug < 1.0:
        raise UserError(f"--p-aug must be in [0, 1), not {p_aug}")
    opts = PipelineOptions(root=root, size=size, data_dir=data_dir, generator_preset=generator_config,
                           predictor_preset=predictor_config, generator_epochs=generator_epochs,
                           generator_steps=generator_steps, samples=n, nsamples=nsamples,
                           max_rounds=max_rounds, rare_prototypes=rare_prototypes,
                           test_dropout=test_dropout,
                           predictor_epochs=predictor_epochs, p_aug=p_aug, backend=backend,
                           threads=threads, direct_limit=direct_limit,
                           log=lambda line: console.print(line, highlight=False, markup=False))
    rows = run_pipeline(name, parse_seeds(seeds), opts)
    console.print(markdown_table(aggregate(rows)), highlight=False, markup=False)
    console.print(f"results: {root / 'results.md'}", highlight=False, markup=False)


def parse_seeds(text: str) -> list[int]:
    """"0,1,2" or "0-4" -> seeds."""
    try:
        if "-" in text:
            low, high = (int(v) for v in text.split("-", 1))
            seeds = list(range(low, high + 1))
        else:
            seeds = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--seeds {text!r}: expected e.g. 0,1,2 or 0-4") from None
    if not seeds or min(seeds) < 0:
        raise UserError(f"--seeds {text!r}: expected non-negative seeds such as 0,1,2 or 0-4")
    return seeds


def main() -> None:
    try:
        app()
    except UserError as exc:
        err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("interrupted", markup=False)
        sys.exit(130)


if __name__ == "__main__":
    main()
