"""`compgen augment`: synthesize training data by recombination."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from compgen.cli.common import DataDir, app, console
from compgen.errors import UserError

augment_app = typer.Typer(no_args_is_help=True, help="Synthesize training data by recombination (GECA) or from an induced grammar (CSL).")
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
    seed: int | None = typer.Option(None, "--seed", help="random seed of the synthesized sample (default: the preset's)"),
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


@augment_app.command("csl")
def augment_csl(
    data: str = typer.Argument(..., help="data set name (scan/length, ...) or data file; its train split is induced from"),
    output: Path = typer.Option(..., "-o", "--output", help="samples TSV to write (x<TAB>y)"),
    config: str = typer.Option("scan", "--config", help="scan (the reference's SCAN settings)"),
    n: int = typer.Option(100_000, "--n", help="synthetic pairs to sample"),
    grammar: Path | None = typer.Option(None, "--grammar", help="reuse this grammar file instead of inducing one"),
    grammar_out: Path | None = typer.Option(None, "--grammar-out", help="write the grammar (source ### target, one rule a line)"),
    uniform: bool = typer.Option(False, "--uniform", help="sample rules uniformly, no model (the paper's ablation)"),
    states: int | None = typer.Option(None, "--states", help="latent states of the model (default: the config's)"),
    steps: int | None = typer.Option(None, "--steps", help="training steps of the model (default: the config's)"),
    dedup: bool = typer.Option(False, "--dedup", help="keep distinct samples only"),
    seed: int = typer.Option(0, "--seed", help="seeds the model's initialisation, its batches and the sampler"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    data_dir: Path | None = DataDir,
) -> None:
    """CSL: induce a QCFG from the training pairs, fit its latent-state model, sample pairs."""
    import dataclasses

    from compgen.augment.csl.rules import read_grammar, write_grammar
    from compgen.augment.csl.run import csl_augment, preset
    from compgen.cli.csl_report import csl_progress, print_csl_summary
    from compgen.data import load_dataset, select_split
    from compgen.data.table import pairs as table_pairs
    from compgen.io import write_samples_tsv

    if n < 0:
        raise UserError(f"--n must be >= 0 (got {n})")
    if threads is not None:
        if threads < 1:
            raise UserError("--threads must be >= 1")
        import torch

        torch.set_num_threads(threads)
    for name, value in (("--states", states), ("--steps", steps)):
        if value is not None and value < 1:
            raise UserError(f"{name} must be >= 1 (got {value})")
    cfg = preset(config)
    cfg = dataclasses.replace(cfg, model=dataclasses.replace(
        cfg.model, seed=seed, num_types=states or cfg.model.num_types,
        training_steps=steps or cfg.model.training_steps), sampler=dataclasses.replace(cfg.sampler, seed=seed))
    rules = read_grammar(grammar) if grammar is not None else None
    table = load_dataset(data, data_dir)
    names = table["split"].unique().to_list() if "split" in table.columns else []
    train = table_pairs(select_split(table, "train")) if "train" in names else table_pairs(table)
    test = table_pairs(select_split(table, "test")) if "test" in names else []
    if not train:
        raise UserError(f"{data}: no training examples")
    with csl_progress() as progress:
        result = csl_augment(train, cfg, n, test, grammar=rules, uniform=uniform, dedup=dedup,
                             progress=progress)
    if grammar_out is not None:
        write_grammar(grammar_out, result.rules, header=f"CSL grammar induced from {data} (config {config})")
    rows = write_samples_tsv(output, result.samples)
    print_csl_summary(console, f"CSL {data} (config {config}{', uniform' if uniform else ''})",
                      result.summary, result.phases)
    if data.startswith("scan/"):
        from compgen.data.scan import load_scan_grammar, scan_sample_report
        from compgen.data.sources import resolve_data_dir

        report = scan_sample_report(result.samples, select_split(table, "train"),
                                    load_scan_grammar(resolve_data_dir(data_dir)))
        from compgen.data.scan_semantics import correct_share

        console.print(f"samples: {report['novel_share']:.2%} novel, {report['correct_share']:.2%} are SCAN "
                      f"commands (scan/tasks.txt) with the correct actions, {correct_share(result.samples):.2%} "
                      "translate correctly by the SCAN reading (any nesting)", highlight=False, markup=False)
    console.print(f"wrote {rows:,} pairs to {output}" + (f" and the grammar to {grammar_out}" if grammar_out else ""),
                  highlight=False, markup=False)
