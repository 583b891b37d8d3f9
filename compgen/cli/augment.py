"""`compgen augment geca`: synthesize training data by recombination (GECA)."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.table import Table

from compgen.augment.geca import Execution, augment_file, make_config, parse_memory_budget
from compgen.augment.geca.arrays import peak_rss_mb
from compgen.cli.common import (
    Columns,
    DataDir,
    XField,
    YField,
    console,
    err_console,
    fields_of,
    log_with_flags,
)
from compgen.data.dataset import open_dataset
from compgen.data.task import task_of
from compgen.errors import UserError

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


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


@commands.command("geca")
def augment_geca(
    data: str = typer.Argument(..., help="data set name (scan/jump, lm/kin, cogs, ...) or data file; its train split is used"),
    output: Path = typer.Option(..., "-o", "--output", help="samples TSV to write (x<TAB>y)"),
    preset: str | None = typer.Option(None, "--preset", help="scan | lm | lm-na | semparse | semparse-logic | generic (options below override it; default: generic for a data file or folder, none for a named set)"),
    concat: bool = typer.Option(False, "--concat", help="write the training examples first, then the synthesized ones"),
    wug_limit: str | None = typer.Option(None, "--wug-limit", help="keep spans whose n-gram count is <= this; 'none' = no limit"),
    wug_size: int | None = typer.Option(None, "--wug-size", help="max tokens per span"),
    wug_count: int | None = typer.Option(None, "--wug-count", help="max spans per fragment (1-3)"),
    variants: str | None = typer.Option(None, "--variants", help="fragments tried per template, or 'all'"),
    novel_variants: bool | None = typer.Option(None, "--novel-variants/--tried-variants", help="--variants counts novel examples kept per template, every fragment tried (default for the generic preset), or fragments tried, novel or not (the reference; every other preset)"),
    novel_tries: str | None = typer.Option(None, "--novel-tries", help="with --novel-variants: distinct fragments tried per template, a run of its candidates from a seeded start, or 'all'"),
    n_sample: str | None = typer.Option(None, "--n-sample", help="max synthesized examples, or 'all'"),
    max_comp_len: str | None = typer.Option(None, "--max-comp-len", help="skip examples with len(x)+1+len(y) >= this; 'none'"),
    dedup: bool | None = typer.Option(None, "--dedup/--no-dedup", help="deduplicate training pairs first"),
    output_only: bool | None = typer.Option(None, "--output-only/--no-output-only", help="language modelling: ignore the input side"),
    template_sim: str | None = typer.Option(None, "--template-sim", help="none (whole template) | window"),
    sim_window_size: int | None = typer.Option(None, "--sim-window-size", help="tokens each side of a hole (window)"),
    reference_split: bool | None = typer.Option(None, "--reference-split/--no-reference-split", help="hold out the reference's 640 SCAN validation examples (default: on for --preset scan on scan/*)"),
    reference_offsets: bool | None = typer.Option(None, "--reference-offsets/--no-reference-offsets", help="third span searched from the reference's start position (default on)"),
    seed: int | None = typer.Option(None, "--seed", help="random seed of the synthesized sample (default: the preset's)"),
    memory_budget: str | None = typer.Option(None, "--memory-budget", help="memory for the whole run, e.g. 4G or 512M: the candidate joins run in partitions that fit it, spilled to a temporary folder beside the output (default: a quarter of the machine's RAM; 'none' = all in memory). Same output whatever the budget"),
    ray: str | None = typer.Option(None, "--ray", help="run the partitions of the candidate joins as Ray tasks: 'local' (a local cluster) or a cluster ADDRESS (HOST:PORT). Same output as one process"),
    data_dir: Path | None = DataDir,
    x_field: str | None = XField,
    y_field: str | None = YField,
    columns: str | None = Columns,
) -> None:
    """GECA: put fragments into templates that share an environment; write novel examples."""
    execution = Execution(memory_budget=parse_memory_budget(memory_budget), ray=ray or None)
    limits = {"wug_limit": _count_option("--wug-limit", wug_limit, ("none",)),
              "variants": _count_option("--variants", variants, ("all",)),
              "novel_tries": _count_option("--novel-tries", novel_tries, ("all",)),
              "n_sample": _count_option("--n-sample", n_sample, ("all", "none")),
              "max_comp_len": _count_option("--max-comp-len", max_comp_len, ("none",))}
    overrides = {"wug_size": wug_size, "wug_count": wug_count, "dedup": dedup, "output_only": output_only,
                 "template_sim": template_sim, "sim_window_size": sim_window_size, "seed": seed,
                 "reference_offsets": reference_offsets, "novel_variants": novel_variants}
    cfg = make_config(preset, {**overrides, **{k: v for k, v in limits.items() if v != "unlimited"}},
                      data, reference_split)
    for key, value in limits.items():
        if value == "unlimited":
            setattr(cfg, key, None)
    cfg.validate()
    start = time.perf_counter()
    with console.status("GECA: extracting templates and fragments ...") as status:
        fields = fields_of(x_field, y_field, columns)
        dataset = open_dataset(data, data_dir, fields)
        result = augment_file(dataset, output, cfg, concat=concat, data_dir=data_dir,
                              progress=lambda msg: status.update(f"GECA: {msg}"),
                              execution=execution)
    s = result.stats
    preset_used = preset or task_of(data).geca_preset()
    table = Table(title=f"GECA {Path(data).name}" + (f" (preset {preset_used})" if preset_used else ""))
    table.add_column("")
    table.add_column("value", justify="right")
    rows = [("examples in", s["examples_in"]), ("training examples", s["training_examples"]),
            ("templates (distinct)", s["templates"]), ("fragments (distinct)", s["fragments"]),
            ("templates that can take part", s["active_templates"]), ("proposals", s["proposals"]),
            ("synthesized", s["synthesized"]), ("templates used", s["templates_used"]),
            ("fragments used", s["fragments_used"]), ("rows written", s["rows_written"]),
            ("join partitions", s.get("partitions", 0)),
            ("extraction shards", s.get("shards", 1))]
    for name, value in rows:
        table.add_row(name, f"{value:,}")
    table.add_row("time", f"{time.perf_counter() - start:.1f} s")
    table.add_row("peak memory", f"{peak_rss_mb():,.0f} MB")
    console.print(table)
    console.print(f"wrote {output}", highlight=False, markup=False)
    for reason in result.warnings:
        log_with_flags(err_console)(f"warning: {reason}")
