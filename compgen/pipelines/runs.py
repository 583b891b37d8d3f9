"""The paper's experiments, one named run per table row: ``compgen pipeline NAME --seeds``.

A run is a short recipe (``Run``): how the augmented data is made (nothing, GECA, or a
generator trained and sampled), which predictor preset learns from it, and how it is
scored. ``rows.py`` lists them (``RUNS``), named ``<data>-<row>``:

* SCAN (``jump-*``, ``around_right-*``): baseline, geca, basic (recomb-0, the paper's
  "learned aug. (basic)"), basic-resample, recomb1, recomb2 (both with the rare-word
  resampling of the paper's cascade), recomb2-noresample, recomb2-vae, recomb2-nocopy,
  direct (direct inference with the recomb-2 generator, no predictor); csl and
  csl-uniform (CSL's samples, from the fitted model or uniform over the rules: the
  paper's ablation), also on ``length-*`` (with its baseline).
  ``around_right-recomb2-reference`` and ``around_right-recomb2-noresample`` run the
  reference's own around_right script end to end at its sizes, whatever ``--size``
  (``REFERENCE_RECIPE``); the other rows are the paper's rows with the project's sizes.
* GeoQuery (``geo-<sql|logic>-<query|question>-*``, the GECA paper's Table 2): baseline
  and geca with the reference's predictor (``seq2seq_geo``) at every size; on the SQL
  query split also recomb2 (a generic-data R&R generator, resampled) and csl.
* SIGMORPHON (``<language>-h<hints>-*`` for spanish, swahili, turkish and hints 4/8/16):
  baseline, basic, basic-resample, recomb1, recomb1-noresample, recomb2, recomb1-vae.
  The seed picks the few-shot split (``hints-8.<seed>``), as the paper's five splits are
  its five seeds.

Every run works in ``<root>/<name>/seed<k>/`` and each step leaves a file behind
(``augment.tsv`` or ``generator.pt`` + ``samples.tsv``, ``predictor.pt``,
``metrics.csv``), so an interrupted pipeline resumes where it stopped: finished steps
are skipped, an interrupted training continues from its last checkpoint. Step wall times
go to ``timing.json``. The metrics of every finished (run, seed) are merged into
``<root>/results.csv`` (+ ``results.summary.csv`` and ``results.md``, mean ± std over
seeds), replacing that (run, seed)'s earlier rows.

Presets: the ``*_cpu`` presets by default (sizes a 2-core machine trains in minutes; see
docs/results.md), or the reference sizes with ``size="reference"``.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl
import torch

from compgen.augment.csl.dataset import csl_augment_dataset
from compgen.augment.geca import augment_file, make_config
from compgen.data import load_dataset
from compgen.data.dataset import open_dataset
from compgen.decoding.options import SampleOptions
from compgen.device import resolve_device
from compgen.errors import SettingError, UserError
from compgen.evaluation.direct_inference import evaluate_direct
from compgen.evaluation.evaluate import evaluate_predictor, write_results
from compgen.export.kinds import export_checkpoint
from compgen.io import atomic_open
from compgen.pipelines.rows import (  # noqa: F401 (the catalog, re-exported)
    CSL_SAMPLES,
    RUNS,
    Run,
    find_run,
    own_runs,
    presets,
)
from compgen.pipelines.step_records import (  # noqa: F401 (Timer, settings_path: re-exported)
    Timer,
    check_settings,
    record_settings,
    settings_path,
)
from compgen.sampling.collection import NoSamples, check_sig_rare, scan_quality
from compgen.sampling.run import sample
from compgen.training.checkpoint import apply_overrides, load_checkpoint, load_preset
from compgen.training.generator import train_generator
from compgen.training.predictor import read_predictor, train_predictor

# ------------------------------------------------------------------ the steps

@dataclass
class PipelineOptions:
    root: Path = Path("runs/pipeline")
    size: str = "cpu"
    data_dir: Path | None = None
    generator_preset: str | None = None   # preset name or TOML file instead of the size's
    predictor_preset: str | None = None
    generator_epochs: int | None = None   # override the generator preset's epochs
    generator_steps: int | None = None    # stop the generator after this many updates
    samples: int | None = None            # samples to keep (default: the preset's n)
    nsamples: int | None = None           # accepted samples the n are kept from
    max_rounds: int | None = None         # sampling batches at most (default: the preset's)
    rare_prototypes: bool | None = None   # SCAN: prototype tuples must contain the rare phrase
    prototype_cut: str | None = None      # SCAN Omega's length cut (default: the preset's, mean)
    rare: str | None = None               # resampling rows: SIG tags (auto, fixed = PST,FUT)
    raise_temperature: bool | None = None  # warmer when stalled (None: yes, the pipeline's recipe)
    test_dropout: bool | None = None      # dropout while sampling (default: the preset's)
    predictor_epochs: int | None = None   # override the predictor preset's epochs
    keep_every: int = 0                   # predictor: keep every N-th epoch's checkpoint too
    p_aug: float | None = None            # override the run's augmentation probability
    csl_temperature: float | None = None  # CSL rows: sampling temperature (the reference: 1)
    backend: str = "torch"                # sampling: torch (eager) | onnx (exported graphs)
    threads: int | None = None
    direct_limit: int | None = None       # direct inference: first N test inputs only
    device: str | None = None             # compgen.device: training, sampling, evaluation
    log: Callable[[str], None] = print


def resolved_options(run: Run, opts: PipelineOptions) -> PipelineOptions:
    """``opts`` with what the caller left unset (None) taken from the run's recipe."""
    unset = {name: value for name, value in run.recipe.items() if getattr(opts, name) is None}
    return replace(opts, **unset) if unset else opts


def _finished_generator(path: Path, max_steps: int | None, epochs: int | None) -> bool:
    if not path.is_file():
        return False
    state = load_checkpoint(path, kind="recombine").train_state
    if max_steps is not None and state.get("step", 0) >= max_steps:
        return True
    return bool(state.get("done")) and (epochs is None or state.get("epoch", 0) >= epochs)


# what a run folder derives from its generator: stale once the generator trains on
GENERATOR_OUTPUTS = ("samples.tsv", "samples.quality.json", "exported", "predictor.pt",
                     "predictor.pt.curve.csv", "metrics.csv", "samples.tsv.settings.json",
                     "predictor.pt.settings.json", "metrics.csv.settings.json")


def _finished_predictor(path: Path) -> bool:
    return path.is_file() and "state" not in read_predictor(path).train_state


def _predictor_p_aug(run: Run, augmented: bool, opts: PipelineOptions) -> float:
    """The mixing probability the run's predictor trains with (0 = concatenation)."""
    if not augmented:
        return 0.0
    return opts.p_aug if opts.p_aug is not None else (run.p_aug or 0.0)


def _drop_predictor_of_other_p_aug(path: Path, p_aug: float, timer: Timer) -> None:
    """A predictor (finished or not) trained with another p_aug is stale, with its metrics."""
    if not path.is_file():
        return
    trained_with = read_predictor(path).config.get("run", {}).get("p_aug")
    if trained_with is None or abs(trained_with - p_aug) < 1e-12:
        return
    for name in ("predictor.pt", "predictor.pt.curve.csv", "metrics.csv",
                 "predictor.pt.settings.json", "metrics.csv.settings.json"):
        (path.parent / name).unlink(missing_ok=True)
    timer.forget(("predictor", "evaluate"))


def make_generator(run: Run, seed: int, folder: Path, opts: PipelineOptions,
                   timer: Timer) -> Path:
    """Train (or resume) the run's generator; returns the checkpoint path."""
    path = folder / "generator.pt"
    preset = opts.generator_preset or presets(run, opts.size)[0]
    settings = {"--generator-config": preset}
    check_settings(path, settings, run, seed)
    if _finished_generator(path, opts.generator_steps, opts.generator_epochs):
        return path
    _remove_stale(folder, timer)
    config = generator_config(run, seed, opts)
    tic = time.perf_counter()
    opts.log(f"[{run.name} seed {seed}] generator: {preset} {run.generator}")
    train_generator(config, run.dataset_for(seed), path, data_dir=opts.data_dir,
                    resume=path.is_file(), epochs=opts.generator_epochs,
                    max_steps=opts.generator_steps, progress=False, log=opts.log,
                    device=opts.device)
    record_settings(path, settings)
    timer.record("generator", time.perf_counter() - tic)
    return path


def generator_config(run: Run, seed: int, opts: PipelineOptions) -> dict:
    """The config the run's generator is trained with (its [sample] table: the sampling
    defaults)."""
    preset = opts.generator_preset or presets(run, opts.size)[0]
    overrides = {**run.generator, "train.seed": seed, "train.threads": opts.threads,
                 "train.epochs": opts.generator_epochs}
    return apply_overrides(load_preset(preset), overrides)


def _remove_stale(folder: Path, timer: Timer) -> None:
    """Before the generator trains (on): drop what an earlier generator produced."""
    for name in GENERATOR_OUTPUTS:
        stale = folder / name
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.is_file():
            stale.unlink()
    timer.forget(("sample", "predictor", "evaluate"))


def make_samples(run: Run, seed: int, generator: Path, folder: Path, opts: PipelineOptions,
                 timer: Timer) -> Path:
    """Sample the generator (eager or through its ONNX export) into ``samples.tsv``."""
    opts = resolved_options(run, opts)
    path = folder / "samples.tsv"
    settings = {"--n": opts.samples, "--nsamples": opts.nsamples, "--max-rounds": opts.max_rounds,
                "--rare-prototypes": opts.rare_prototypes, "--prototype-cut": opts.prototype_cut,
                "--rare": opts.rare, "--test-dropout": opts.test_dropout,
                "--raise-temperature": opts.raise_temperature, "--backend": opts.backend}
    check_settings(path, settings, run, seed)
    if path.is_file():
        return path
    tic = time.perf_counter()
    samples, options = sampling_request(run, opts)
    try:
        result = _sample(run, generator, samples, seed, folder, path, opts, options)
    except NoSamples as exc:
        opts.log(f"[{run.name} seed {seed}] {exc.template}")
        result = None
    if result is None or not result.samples:
        path.unlink(missing_ok=True)  # a rerun must sample again, not train on nothing
        raise SettingError(f"{run.name} seed {seed}: the generator made no sample that passes "
                           "the filter; train it longer (`generator_epochs`) or allow more "
                           "rounds (`max_rounds`; SCAN around_right: `rare_prototypes`)")
    record_settings(path, settings)
    quality = scan_quality(result, opts.data_dir)
    if quality:
        with atomic_open(folder / "samples.quality.json", "w", encoding="utf-8") as f:
            json.dump(quality, f, indent=1)
        opts.log(f"[{run.name} seed {seed}] {len(result.samples)} samples: "
                 f"'{quality['primitive']}' in a new command "
                 f"{quality['uses_primitive_in_new_command_share']:.1%}, correct "
                 f"{quality['correct_share']:.1%}")
    timer.record("sample", time.perf_counter() - tic)
    return path


def sampling_request(run: Run, opts: PipelineOptions) -> tuple[int | None, dict]:
    """(samples kept, the other sampling options) of ``run`` as asked by ``opts``; None
    leaves the choice to the generator preset's ``[sample]``."""
    options = {k: run.sample.get(k) for k in ("strategy", "temperature", "resample", "rare")}
    # --n / --nsamples win over the run's (around_right keeps 300 of 500), then the preset's
    samples = opts.samples or run.sample.get("n")
    options["nsamples"] = opts.nsamples or (None if opts.samples else run.sample.get("nsamples"))
    options["max_rounds"] = opts.max_rounds
    options["rare_prototypes"] = opts.rare_prototypes
    options["prototype_cut"] = opts.prototype_cut
    options["rare"] = opts.rare or options["rare"]
    # warmer when stalled, unless asked not to: the reference had no such loop (it ran each
    # script at one temperature until nsamples were accepted), but without it a cold sampler
    # can stall for thousands of rounds
    options["raise_temperature"] = opts.raise_temperature is not False
    return samples, options


def _sample(run: Run, generator: Path, samples: int | None, seed: int, folder: Path,
            path: Path, opts: PipelineOptions, asked: dict):
    """Sample with the run's backend: eager, or through the generator's export."""
    source = generator
    if opts.backend in ("onnx", "torchscript", "cpp"):
        source = folder / "exported"
        if not (source / "manifest.json").is_file():
            export_checkpoint(generator, source, data_dir=opts.data_dir, log=opts.log)
    elif opts.backend != "torch":
        raise SettingError(f"`backend` {opts.backend}: unknown (valid: torch, onnx, torchscript, cpp)")
    options = SampleOptions.resolve(generator_config(run, seed, opts), n=samples,
                                    seed=seed, threads=opts.threads,
                                    test_dropout=opts.test_dropout, device=opts.device, **asked)
    return sample(source, options, opts.backend, out=path, data_dir=opts.data_dir,
                  log=opts.log)


def make_geca(run: Run, seed: int, folder: Path, opts: PipelineOptions, timer: Timer) -> Path:
    path = folder / "augment.tsv"
    if path.is_file():
        return path
    tic = time.perf_counter()
    preset = run.geca_preset or ("scan" if run.task == "scan" else "semparse")
    augment_file(run.dataset_for(seed), path, make_config(preset, {"seed": seed}, run.data_for(seed)),
                 data_dir=opts.data_dir)
    timer.record("geca", time.perf_counter() - tic)
    return path


def make_csl(run: Run, seed: int, folder: Path, opts: PipelineOptions, timer: Timer) -> Path:
    """CSL's samples (``augment.tsv``), the grammar (``grammar.txt``) and a summary with
    the samples' quality (``augment.quality.json``); SCAN rows run CSL's SCAN settings,
    others its generic ones. A grammar that derives no held-out pair is a UserError."""
    path = folder / "augment.tsv"
    settings = {"--csl-temperature": opts.csl_temperature}
    check_settings(path, settings, run, seed)
    if path.is_file():
        return path
    tic = time.perf_counter()
    config = "scan" if run.task == "scan" else "generic"
    done = csl_augment_dataset(run.dataset_for(seed), path, config, CSL_SAMPLES, seed,
                               uniform=run.augment == "csl-uniform",
                               grammar_out=folder / "grammar.txt", data_dir=opts.data_dir,
                               temperature=opts.csl_temperature)
    record_settings(path, settings)
    timer.record("csl", time.perf_counter() - tic)
    summary = {**done.result.summary, **done.quality,
               "phases": done.result.phases}
    with atomic_open(folder / "augment.quality.json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1, default=str)
    opts.log(f"[{run.name} seed {seed}] CSL: {done.rows:,} samples, {summary['rules']} rules, "
             + ", ".join(f"{k} {v:.2%}" for k, v in done.quality.items()))
    # the test split is held out; dev is not always (GeoQuery's test mode trains on it)
    held_out = ["test_coverage"] if "test_coverage" in summary else [
        k for k in ("dev_coverage",) if k in summary]
    if held_out and not any(summary[k] > 0 for k in held_out):
        path.unlink()   # a rerun induces again rather than train on samples that cannot help
        raise UserError(f"{run.name} seed {seed}: CSL's grammar ({summary['rules']:,} rules from "
                        f"{summary['train_pairs']:,} training pairs) derives none of the held-out "
                        f"pairs ({', '.join(f'{k} 0 %' for k in held_out)}): its samples cannot "
                        f"teach what the test asks, so the row stops before the predictor "
                        f"(grammar and figures: {folder}/grammar.txt, augment.quality.json)")
    return path


def make_predictor(run: Run, seed: int, augment: Path | None, folder: Path,
                   opts: PipelineOptions, timer: Timer) -> Path:
    path = folder / "predictor.pt"
    p_aug = _predictor_p_aug(run, augment is not None, opts)
    _drop_predictor_of_other_p_aug(path, p_aug, timer)
    preset = opts.predictor_preset or presets(run, opts.size)[1]
    settings = {"--predictor-config": preset, "--predictor-epochs": opts.predictor_epochs}
    check_settings(path, settings, run, seed)
    if _finished_predictor(path):
        return path
    tic = time.perf_counter()
    opts.log(f"[{run.name} seed {seed}] predictor: {preset or 'settings sized from the data'}"
             + (f", augmented {augment} p_aug {p_aug}" if augment else ""))
    train_predictor(run.dataset_for(seed), preset, path, augment=augment,
                    p_aug=p_aug if augment else None,  # None: the baseline's own data only
                    seed=seed, data_dir=opts.data_dir, epochs=opts.predictor_epochs,
                    resume=path.is_file(), label=run.label, keep_every=opts.keep_every,
                    log=opts.log, device=opts.device)
    record_settings(path, settings)
    timer.record("predictor", time.perf_counter() - tic)
    return path


def evaluate_run(run: Run, seed: int, model: Path, folder: Path, opts: PipelineOptions,
                 timer: Timer) -> list[dict]:
    path = folder / "metrics.csv"
    settings = {"--direct-limit": opts.direct_limit} if run.augment == "direct" else {}
    check_settings(path, settings, run, seed)
    if path.is_file():
        return pl.read_csv(path).to_dicts()
    tic = time.perf_counter()
    if run.augment == "direct":
        rows = evaluate_direct(model, data_dir=opts.data_dir, limit=opts.direct_limit)
    else:
        rows = evaluate_predictor(model, data_dir=opts.data_dir,
                                  device=resolve_device(opts.device))
    timer.record("evaluate", time.perf_counter() - tic)
    rows = [{**r, "model": f"{run.name}/seed{seed}", "label": run.label, "data": run.table_data,
             "seed": seed, "run": run.name, "wall_seconds": round(sum(timer.seconds.values()), 1)}
            for r in rows]
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(pl.DataFrame(rows).write_csv())
    record_settings(path, settings)
    return rows


def run_one(run: Run, seed: int, opts: PipelineOptions) -> list[dict]:
    """All steps of one (run, seed); returns its metric rows."""
    opts = resolved_options(run, opts)
    if opts.threads:
        torch.set_num_threads(opts.threads)
    if run.dataset is None:   # a named set: read once for every step of this seed
        run = replace(run, dataset=open_dataset(run.data_for(seed), opts.data_dir))
    folder = opts.root / run.name / f"seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    timer = Timer(folder / "timing.json")
    if run.augment == "direct":
        model = make_generator(run, seed, folder, opts, timer)
    else:
        augment = None
        if run.augment == "geca":
            augment = make_geca(run, seed, folder, opts, timer)
        elif run.augment in ("csl", "csl-uniform"):
            augment = make_csl(run, seed, folder, opts, timer)
        elif run.augment == "generator":
            generator = make_generator(run, seed, folder, opts, timer)
            augment = make_samples(run, seed, generator, folder, opts, timer)
        model = make_predictor(run, seed, augment, folder, opts, timer)
    return evaluate_run(run, seed, model, folder, opts, timer)


def merge_results(root: Path, rows: list[dict]) -> dict[str, Path]:
    """Add ``rows`` to ``<root>/results.csv``, replacing earlier rows of the same
    (run, seed); rewrite the summary and Markdown tables."""
    path = root / "results.csv"
    new = pl.DataFrame(rows)
    if path.is_file():
        old = pl.read_csv(path)
        done = new.select("run", "seed").unique()
        old = old.join(done, on=["run", "seed"], how="anti")
        new = pl.concat([old, new], how="diagonal_relaxed")
    return write_results(new.sort("data", "run", "seed", maintain_order=True).to_dicts(), path)


def run_pipeline(name: str | Run, seeds: list[int], opts: PipelineOptions) -> list[dict]:
    """Run every seed of one named run (or a ``Run``, e.g. one of ``own_runs``); merge the
    metrics into the results table after each."""
    run = name if isinstance(name, Run) else find_run(name)
    name = run.name
    opts = resolved_options(run, opts)
    if not seeds:
        raise SettingError("`seeds`: give at least one seed")
    if opts.test_dropout and opts.backend != "torch":
        recipe = (f" ({name} samples with dropout, as the reference; `no_test_dropout` "
                  "departs from it)" if run.recipe.get("test_dropout") else "")
        raise SettingError(f"`test_dropout`: exported graphs sample without dropout; "
                           f"use `backend` torch, not {opts.backend}{recipe}")
    # options that change how Omega is drawn: only rows whose generator draws SCAN
    # prototypes (a checkpoint draws them; an export stores every cut's and selects)
    cut = opts.prototype_cut not in (None, "mean")
    if cut and (run.augment != "generator" or run.task != "scan"
                or not run.generator.get("model.nproto")):
        raise SettingError(f"`prototype_cut`: {name} draws no SCAN prototypes by length")
    if opts.rare_prototypes and (run.sample.get("resample") != "rare" or run.task != "scan"):
        raise SettingError(f"`rare_prototypes`: {name} is not a SCAN row with resampling")
    if opts.rare is not None:  # a tag the data lack would fail only after training
        if run.sample.get("resample") != "rare" or run.task != "morphology":
            raise SettingError(f"`rare`: {name} is not a SIGMORPHON row with resampling")

        data = run.data_for(seeds[0])
        check_sig_rare(opts.rare, load_dataset(data, opts.data_dir), data)
    all_rows = []
    for seed in seeds:
        tic = time.perf_counter()
        rows = run_one(run, seed, opts)
        merge_results(opts.root, rows)
        all_rows += rows
        opts.log(f"[{run.name} seed {seed}] done in {time.perf_counter() - tic:.0f} s "
                 f"(steps: {json.loads((opts.root / run.name / f'seed{seed}' / 'timing.json').read_text())})")
    return all_rows
