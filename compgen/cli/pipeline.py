"""`compgen pipeline`: the paper's experiments, one named run per table row."""

from __future__ import annotations

import math
from pathlib import Path

import typer

from compgen.cli.common import (
    Columns,
    DataDir,
    DeviceOption,
    XField,
    YField,
    console,
    fields_of,
    log_with_flags,
    ray_address,
)
from compgen.data.dataset import open_dataset
from compgen.decoding.options import check_max_rounds
from compgen.device import resolve_device
from compgen.errors import UserError, check_seed
from compgen.evaluation.evaluate import aggregate, markdown_table
from compgen.pipelines.ray_seeds import run_seeds
from compgen.pipelines.rows import check_own_rows, own_runs
from compgen.pipelines.runs import RUNS, PipelineOptions, find_run, run_pipeline
from compgen.pipelines.stem_corrupt import pipeline_from_cli

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("pipeline")
def pipeline_cmd(
    name: str | None = typer.Argument(None, help="run name, e.g. jump-recomb2, around_right-baseline, swahili-h8-recomb1, geo-sql-query-geca (--list shows all), or own (your --data)"),
    data: str | None = typer.Option(None, "--data", help="own: your data file or folder of train/dev/test files"),
    rows: str = typer.Option("baseline,geca,recomb2", "--rows", help="own: the rows to run, comma-separated (baseline, geca, recomb2)"),
    x_field: str | None = XField,
    y_field: str | None = YField,
    columns: str | None = Columns,
    ray: str | None = typer.Option(None, "--ray", help="run the seeds as Ray tasks: local (start a cluster here; also --ray alone), auto, HOST:PORT or ray://HOST:PORT"),
    seeds: str = typer.Option("0", "--seeds", "--seed", help="comma-separated seeds, or a range 0-4 (SIGMORPHON: the seed is the split index)"),
    root: Path = typer.Option(Path("runs/pipeline"), "--root", help="folder of the runs and of results.csv / results.md"),
    size: str = typer.Option("cpu", "--size", help="cpu (the *_cpu presets) | reference (the reference's sizes)"),
    generator_config: str | None = typer.Option(None, "--generator-config", help="generator preset or TOML file (default: by --size)"),
    predictor_config: str | None = typer.Option(None, "--predictor-config", help="predictor preset or TOML file (default: by --size)"),
    generator_epochs: int | None = typer.Option(None, "--generator-epochs", help="override the generator preset's epochs"),
    generator_steps: int | None = typer.Option(None, "--generator-steps", help="stop generator training after this many updates"),
    n: int | None = typer.Option(None, "--n", help="samples to keep (default: the generator preset's)"),
    nsamples: int | None = typer.Option(None, "--nsamples", help="accepted candidates before keeping the N most probable (default: the preset's ratio, e.g. 500 for 400)"),
    max_rounds: int | None = typer.Option(None, "--max-rounds", help="sampling: batches decoded at most when the filter accepts few candidates, 0 = no cap: until --nsamples are accepted, as the reference (default: the run's, else the preset's, else 200)"),
    rare_prototypes: bool | None = typer.Option(None, "--rare-prototypes/--all-prototypes", help="SCAN rows with resampling: draw only prototype tuples that contain every word of the rare phrase between them (default: all, as the reference)"),
    prototype_cut: str | None = typer.Option(None, "--prototype-cut", help="SCAN rows: Omega's prototypes no longer than the mean length of the training prototypes (mean, the reference's code) or mean + one std (mean+std, the paper's text), or of any length (none); default: the preset's, else mean"),
    rare: str | None = typer.Option(None, "--rare", help="SIGMORPHON rows with resampling: the rare tags samples must carry, auto (training count in (1, 20], the reference's code; the default) or fixed (PST,FUT, the paper's) or a list such as PST,FUT,IPFV"),
    raise_temperature: bool | None = typer.Option(None, "--raise-temperature/--fixed-temperature", help="sampling: when 3 rounds accept nothing new, switch greedy/beam to mixed sampling, then raise the temperature by 0.1 (default), or keep the run's temperature until --nsamples are accepted or --max-rounds pass, as the reference's scripts"),
    test_dropout: bool | None = typer.Option(None, "--test-dropout/--no-test-dropout", help="dropout on the generator's decoder state while sampling (default: the preset's outdrop_test); --n, --nsamples, --max-rounds, --rare-prototypes, --prototype-cut, --rare, --fixed-temperature and this apply when samples.tsv is made, so compare settings under separate --root folders"),
    predictor_epochs: int | None = typer.Option(None, "--predictor-epochs", help="override the predictor preset's epochs"),
    keep_every: int = typer.Option(0, "--keep-every", help="predictor: also keep the checkpoint after every N-th epoch (predictor-epN.pt beside predictor.pt), to go back to when a long run diverges; 0 = only the latest"),
    p_aug: float | None = typer.Option(None, "--p-aug", help="predictor: probability of drawing an augmented example, 0 = concatenate (default: the run's, e.g. 0.01 for jump); a predictor trained with another value is retrained"),
    csl_temperature: float | None = typer.Option(None, "--csl-temperature", help="CSL rows: sampling temperature of the fitted model (default 1, the reference's; higher draws rare primitives more often)"),
    backend: str = typer.Option("torch", "--backend", help="sampling backend: torch (eager) | onnx | torchscript | cpp (export first)"),
    direct_limit: int | None = typer.Option(None, "--direct-limit", help="direct inference: score the first N test inputs only"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    device: str | None = DeviceOption,
    list_runs: bool = typer.Option(False, "--list", help="list the runs and exit"),
    strategies: str | None = typer.Option(None, "--strategies", help="stem-corrupt-LANG: comma-separated selection strategies (default: the stem_corrupt preset's)"),
    sizes: str | None = typer.Option(None, "--sizes", help="stem-corrupt-LANG: comma-separated subset sizes (default: the stem_corrupt preset's)"),
    updates: int | None = typer.Option(None, "--updates", help="stem-corrupt-LANG: inflection model updates (default: the stem_corrupt preset's; given: warm-up 2/3 of them)"),
    uncertainty: str | None = typer.Option(None, "--uncertainty", help="stem-corrupt-LANG: pool scores = hypothesis (beam output's score, the reference code) | reference (NLL of the pool's form, the paper); default: the stem_corrupt preset's"),
    config: str | None = typer.Option(None, "--config", metavar="FILE|NAME", help="stem-corrupt-LANG: the STEM-CORRUPT preset, stem_corrupt (the default) or a TOML file read over it (compgen presets stem_corrupt); the options given here override it"),
    data_dir: Path | None = DataDir,
) -> None:
    """Run one row of the paper's tables (augment -> predictor -> evaluation) for each seed;
    resumes from what an earlier call left behind and appends to ROOT/results.csv."""
    if list_runs or name is None:
        for run_name, run in RUNS.items():
            console.print(f"{run_name:32s} {run.label:28s} {run.data}", highlight=False, markup=False)
        console.print(f"{'stem-corrupt-<lang>':32s} {'STEM-CORRUPT + selection':28s} sigmorphon/<lang>",
                      highlight=False, markup=False)
        return
    if name.startswith("stem-corrupt-"):
        pipeline_from_cli(name, parse_seeds(seeds), root, strategies, sizes, updates, threads, data_dir,
                          uncertainty=uncertainty, config=config,
                          log=log_with_flags(console))
        return
    if name != "own" and (x_field or y_field or columns):
        raise UserError("--x-field/--y-field/--columns read your own data: they go with "
                        "`compgen pipeline own --data FILE`")
    if (name == "own") != (data is not None):
        raise UserError("--data goes with `compgen pipeline own` (your data set's rows), and "
                        "`own` needs --data" if name == "own" else
                        f"--data applies to `compgen pipeline own`, not {name} (its data is fixed)")
    if config is not None:
        raise UserError(f"--config applies to the stem-corrupt-LANG pipelines, not {name} "
                        "(its presets: --generator-config, --predictor-config)")
    for option, value in (("--generator-epochs", generator_epochs), ("--n", n), ("--nsamples", nsamples),
                          ("--generator-steps", generator_steps),
                          ("--predictor-epochs", predictor_epochs), ("--threads", threads),
                          ("--direct-limit", direct_limit)):
        if value is not None and value < 1:
            raise UserError(f"{option} must be >= 1")
    check_max_rounds(max_rounds)
    if keep_every < 0:
        raise UserError(f"--keep-every must be >= 0, not {keep_every}")
    if p_aug is not None and not 0.0 <= p_aug < 1.0:
        raise UserError(f"--p-aug must be in [0, 1), not {p_aug}")
    if csl_temperature is not None and not (math.isfinite(csl_temperature) and csl_temperature > 0):
        raise UserError(f"--csl-temperature must be a finite number > 0, not {csl_temperature}")

    # checked now; each step resolves it again (auto: the C++ runner's sampling is CPU work)
    where = resolve_device(device)
    opts = PipelineOptions(root=root, size=size, data_dir=data_dir, generator_preset=generator_config,
                           predictor_preset=predictor_config, generator_epochs=generator_epochs,
                           generator_steps=generator_steps, samples=n, nsamples=nsamples,
                           max_rounds=max_rounds, rare_prototypes=rare_prototypes,
                           prototype_cut=prototype_cut, rare=rare, raise_temperature=raise_temperature,
                           test_dropout=test_dropout,
                           predictor_epochs=predictor_epochs, keep_every=keep_every, p_aug=p_aug,
                           csl_temperature=csl_temperature, backend=backend,
                           threads=threads, direct_limit=direct_limit, device=device,
                           log=log_with_flags(console))
    if name == "own":
        if ray is not None:
            raise UserError("--ray runs the named rows; run `compgen pipeline own` without it")
        chosen = parse_seeds(seeds)
        own_rows = check_own_rows(tuple(r.strip() for r in rows.split(",") if r.strip()))
        # read once, with the fields named: a file that cannot be read fails before any
        # training, and every step of every row trains on this table
        fields = fields_of(x_field, y_field, columns)
        dataset = open_dataset(data, data_dir, fields)
        runs = own_runs(dataset, own_rows)
        rows_done = [row for run in runs for row in run_pipeline(run, chosen, opts)]
        console.print(markdown_table(aggregate(rows_done)), highlight=False, markup=False)
        console.print(f"results: {root / 'results.md'} (on {where})", highlight=False, markup=False)
        return
    if ray is not None:
        find_run(name)   # an unknown run name fails here, before Ray starts
        address, chosen = ray_address(ray), parse_seeds(seeds)   # both checked before Ray starts
        rows = run_seeds(name, chosen, opts, address)
    else:
        rows = run_pipeline(name, parse_seeds(seeds), opts)
    console.print(markdown_table(aggregate(rows)), highlight=False, markup=False)
    console.print(f"results: {root / 'results.md'} (on {where})", highlight=False, markup=False)


MAX_SEEDS = 10_000


def parse_seeds(text: str) -> list[int]:
    """"0,1,2" or "0-4" -> seeds."""
    try:
        if "-" in text:
            low, high = (int(v) for v in text.split("-", 1))
            if high - low >= MAX_SEEDS:
                raise UserError(f"--seeds {text!r}: at most {MAX_SEEDS:,} seeds")
            seeds = list(range(low, high + 1))
        else:
            seeds = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(f"--seeds {text!r}: expected e.g. 0,1,2 or 0-4") from None
    if not seeds or min(seeds) < 0:
        raise UserError(f"--seeds {text!r}: expected non-negative seeds such as 0,1,2 or 0-4")
    check_seed(max(seeds), "seeds")
    return seeds
