"""`compgen sample`: synthetic pairs from a generator checkpoint or export."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.progress import Progress, TextColumn, TimeElapsedColumn

from compgen.cli.common import (
    Columns,
    DataDir,
    DeviceOption,
    XField,
    YField,
    console,
    err_console,
    fields_of,
    log_with_flags,
    ray_address,
)
from compgen.data.resample import rare_summary
from compgen.decoding.options import SampleOptions
from compgen.errors import UserError
from compgen.lm.rerank import LmRanking
from compgen.pipelines.sample_report import check_report_options, describe, user_sample_report
from compgen.sampling.collection import Tally, scan_quality
from compgen.sampling.ray import RayDecoderFactory
from compgen.sampling.run import sample, source_config
from compgen.system.ray_cluster import import_ray

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("sample")
def sample_cmd(
    checkpoint: Path = typer.Argument(..., help="generator checkpoint (compgen train generator -o ...) or export folder (compgen export)"),
    n: int | None = typer.Option(None, "--n", help="samples to keep (default: the preset's)"),
    strategy: str | None = typer.Option(None, "--strategy", help="beam | temperature | greedy | mixed"),
    beam_width: int | None = typer.Option(None, "--beam-width", help="hypotheses kept by beam search (default: the preset's, else 4)"),
    temperature: float | None = typer.Option(None, "--temperature", "-T", help="softmax temperature of temperature/mixed sampling (default: the preset's, else 1.0)"),
    resample: str | None = typer.Option(None, "--resample", help="none | rare (rare-token rule)"),
    rare: str | None = typer.Option(None, "--rare", help="SCAN: word/n-gram the input must contain; SIG: tags (PST,FUT) or auto; your own data: tokens TOK,TOK a sample must hold one of, or auto (the rarest tokens, held together by at most 1 % of the training pairs; none on data without such)"),
    oracle: str | None = typer.Option(None, "--oracle", help="your own data: a command that reads x<TAB>y lines on stdin and prints 1 (correct) or 0 per line; the report gives the share it judges correct"),
    nsamples: int | None = typer.Option(None, "--nsamples", help="accepted candidates before keeping the N most probable"),
    max_rounds: int | None = typer.Option(None, "--max-rounds", help="batches decoded at most when the filter accepts few candidates, 0 = no cap: until --nsamples are accepted, as the reference (default: the preset's, else 200)"),
    rare_prototypes: bool | None = typer.Option(None, "--rare-prototypes/--all-prototypes", help="SCAN with --resample rare: draw only prototype tuples that contain every word of --rare between them (default: the preset's, else all)"),
    prototype_cut: str | None = typer.Option(None, "--prototype-cut", help="SCAN: Omega's prototypes no longer than the mean length of the training prototypes (mean, the reference's code) or mean + one std (mean+std, the paper's text), or of any length (none); default: the preset's, else mean"),
    batch_size: int | None = typer.Option(None, "--batch-size", help="prototype tuples decoded per round (default: the preset's, else 128)"),
    output: Path | None = typer.Option(None, "-o", "--output", help="samples TSV (x<TAB>y<TAB>logprob)"),
    backend: str | None = typer.Option(None, "--backend", help="onnx | torchscript | cpp (export folders; default onnx) | torch (eager PyTorch: on an export folder, the same samples as the others; default for checkpoints)"),
    test_dropout: bool | None = typer.Option(None, "--test-dropout/--no-test-dropout", help="dropout on the decoder state while sampling (default: the checkpoint's outdrop_test)"),
    raise_temperature: bool = typer.Option(False, "--raise-temperature", help="when 3 rounds accept nothing new, switch greedy/beam to mixed sampling, then raise the temperature by 0.1 (off: the sampler runs as asked)"),
    novel_inputs: bool = typer.Option(False, "--novel-inputs", help="greedy/temperature/mixed with the novelty filter: mask <sep> while the input written so far is a training input, instead of decoding it to the end and discarding it (fewer candidates decoded; inputs that extend a training input become likelier than rejection sampling makes them: docs/results.md)"),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads (default: the cores)"),
    precision: str | None = typer.Option(None, "--precision", help="export folders: fp32 (default) | bf16 (--backend torchscript, or cpp / torch: compiled by AOTInductor; CPUs with AVX512-BF16 or AMX) | int8 (--backend onnx); reduced precision is faster, its samples may differ from fp32's"),
    seed: int = typer.Option(0, "--seed", help="random seed: prototype order, sampling and dropout; the same seed gives the same samples"),
    lm: str | None = typer.Option(None, "--lm", help="KenLM model(s) BASE[,AUG] (.arpa/.bin): adds an lm_logprob column (log10)"),
    lm_weight: float | None = typer.Option(None, "--lm-weight", help="weight of the augmented model AUG (geca mix: ratio r)"),
    lm_mix: str = typer.Option("token", "--lm-mix", help="token | sentence | geca: how BASE and AUG are mixed (as compgen lm eval --mix)"),
    lm_val: str | None = typer.Option(None, "--lm-val", help="choose --lm-weight on this validation text: a .txt corpus, or data whose --lm-side side is read"),
    lm_side: str = typer.Option("y", "--lm-side", help="what the LM reads: y | x | xy (x <sep> y)"),
    rerank: str = typer.Option("model", "--rerank", help="order before the N best are kept: model (logprob) | lm (lm_logprob) | sum (both, in nats)"),
    min_lm_logprob: float | None = typer.Option(None, "--min-lm-logprob", help="reject candidates whose lm_logprob (log10) is below this"),
    ray: str | None = typer.Option(None, "--ray", help="shard decoding over Ray: local (start a cluster here; also --ray alone), auto, HOST:PORT or ray://HOST:PORT; same file as one process"),
    ray_workers: int | None = typer.Option(None, "--ray-workers", help="Ray actors decoding at once (default: a local cluster's cores, else 2)"),
    resume: bool = typer.Option(False, "--resume", help="export folders with -o: go on from OUTPUT.partial, the journal an interrupted run of the same command left (accepted samples are journaled as they come; the file is written when the job ends)"),
    device: str | None = DeviceOption,
    data_dir: Path | None = DataDir,
    x_field: str | None = XField,
    y_field: str | None = YField,
    columns: str | None = Columns,
) -> None:
    """Sample unique, novel synthetic data from a generator (optionally rare-token resampled)."""
    check_report_options(checkpoint, oracle)
    if resume and output is None:
        raise UserError("--resume: needs -o (the journal is kept beside the output)")
    # the flags over the source's [sample] preset, checked once, before anything loads
    options = SampleOptions(
        preset=source_config(checkpoint).get("sample", {}), n=n, strategy=strategy,
        temperature=temperature, beam_width=beam_width, nsamples=nsamples,
        batch_size=batch_size, max_rounds=max_rounds, resample=resample, rare=rare,
        rare_prototypes=rare_prototypes, prototype_cut=prototype_cut,
        raise_temperature=raise_temperature or None, novel_inputs=novel_inputs or None,
        test_dropout=test_dropout, seed=seed,
        threads=threads, precision=precision, device=device)
    # loads the LM files now: a missing or corrupt model stops before any decoding
    if lm_val is None and (x_field or y_field or columns):
        raise UserError("--x-field/--y-field/--columns read the pairs of --lm-val: they go "
                        "with it")
    fields = fields_of(x_field, y_field, columns)
    ranking = LmRanking.from_options(lm, lm_weight, lm_side, lm_mix, rerank, min_lm_logprob,
                                     lm_val, data_dir, fields)
    if ranking is not None and ranking.weight_choice:
        err_console.print(ranking.weight_choice, highlight=False, markup=False, soft_wrap=True)
    factory = None
    if ray is not None:
        if ray_workers is not None and ray_workers < 1:
            raise UserError("--ray-workers must be >= 1")
        address = ray_address(ray)
        import_ray()
        factory = RayDecoderFactory(address, ray_workers or (
            (os.cpu_count() or 2) if address is None else 2))
    elif ray_workers is not None:
        raise UserError("--ray-workers needs --ray")
    # without -o the samples TSV goes to stdout, the same bytes as the -o file: written to
    # a private temporary file first; the summary lines then go to stderr
    scratch = tempfile.TemporaryDirectory(prefix="compgen-sample-") if output is None else None
    report = console if output is not None else err_console
    target = output or Path(scratch.name) / "samples.tsv"
    tally = Tally()
    with scratch or contextlib.nullcontext():
        with sampling_progress(tally):
            run = sample(checkpoint, options, backend, out=target, data_dir=data_dir,
                         lm=ranking, decoder_factory=factory, tally=tally, resume=resume,
                         log=log_with_flags(err_console))
        if output is None:
            sys.stdout.buffer.write(target.read_bytes())
            sys.stdout.flush()
    # the user's oracle runs before any summary line: its failure is the one line printed
    judged = user_sample_report(checkpoint, [(s.x, s.y) for s in run.samples], rare, oracle)
    details = [f"{run.decode_seconds:.1f} s decoding"] if run.decode_seconds is not None else []
    if run.decoded:
        details.append(f"{run.decoded:,} candidates decoded from {run.tuples or 'prototype tuples'}"
                       f", {tally.accepted / run.decoded:.1%} accepted")
    details.append(f"{len(run.samples) / max(run.seconds, 1e-9):,.1f} samples/s")
    if run.build_seconds >= 1:
        details.append(f"the C++ runner built first in {run.build_seconds:.0f} s, not counted")
    # the precision is fp32 unless asked: bf16 changes samples, and its share of correct
    # samples has not been measured against fp32 on every CPU that could run it
    where = (f" on {run.device}" if run.device else "") + f", {options.precision}"
    report.print(f"{len(run.samples)} samples in {run.seconds:.1f} s{where} ({'; '.join(details)})"
                  + (f" -> {output}" if output else ""), highlight=False, markup=False)
    if ranking is not None:
        scorer = ranking.scorer
        report.print(f"{ranking.describe()}: {scorer.sentences} sentences scored in "
                      f"{scorer.seconds:.3f} s ({scorer.sentences / max(scorer.seconds, 1e-9):,.0f}"
                      f" sentences/s, {scorer.seconds / max(run.seconds, 1e-9):.1%} of the "
                      "sampling time)", highlight=False, markup=False)
    if judged is not None:  # judged by what the user's data allow
        # the rare tokens as a count and the first few: data can have hundreds
        shown = {**judged, "rare_tokens": [rare_summary(judged["rare_tokens"])]}
        report.print(describe(shown), highlight=False, markup=False)
        return
    quality = scan_quality(run, data_dir)
    if quality:
        report.print(f"novel {quality['novel_share']:.1%}, '{quality['primitive']}' in a new "
                      f"command {quality['uses_primitive_in_new_command_share']:.1%}, correct SCAN "
                      f"pairs {quality['correct_share']:.1%}", highlight=False, markup=False)


@contextmanager
def sampling_progress(tally):
    """A progress bar on the terminal (kept / decoded / acceptance / samples/s), updated
    after every round; nothing when standard error is not a terminal."""
    if not err_console.is_terminal:
        yield
        return
    started = time.perf_counter()
    with Progress(TextColumn("{task.description}"), TimeElapsedColumn(), console=err_console,
                  transient=True) as bar:
        task = bar.add_task("sampling", total=None)

        def update(t):
            rate = t.accepted / max(time.perf_counter() - started, 1e-9)
            bar.update(task, description=(
                f"accepted {t.accepted:,} of {t.wanted:,} · decoded {t.decoded:,} · "
                f"{t.accepted / max(t.decoded, 1):.1%} accepted · {rate:,.1f} samples/s"))
        tally.on_round = update
        yield
