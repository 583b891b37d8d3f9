"""`compgen sample`: synthetic pairs from a generator checkpoint or export."""

from __future__ import annotations

from pathlib import Path

import typer

from compgen.cli.common import DataDir, app, console, err_console
from compgen.errors import UserError


@app.command("sample")
def sample_cmd(
    checkpoint: Path = typer.Argument(..., help="generator checkpoint (compgen train generator -o ...) or export folder (compgen export)"),
    n: int | None = typer.Option(None, "--n", help="samples to keep (default: the preset's)"),
    strategy: str | None = typer.Option(None, "--strategy", help="beam | temperature | greedy | mixed"),
    beam_width: int | None = typer.Option(None, "--beam-width", help="hypotheses kept by beam search (default: the preset's, else 4)"),
    temperature: float | None = typer.Option(None, "--temperature", "-T", help="softmax temperature of temperature/mixed sampling (default: the preset's, else 1.0)"),
    resample: str | None = typer.Option(None, "--resample", help="none | rare (rare-token rule)"),
    rare: str | None = typer.Option(None, "--rare", help="SCAN: word/n-gram the input must contain; SIG: tags (PST,FUT) or auto"),
    nsamples: int | None = typer.Option(None, "--nsamples", help="accepted candidates before keeping the N most probable"),
    max_rounds: int | None = typer.Option(None, "--max-rounds", help="batches decoded at most when the filter accepts few candidates (default: the preset's, else 200)"),
    rare_prototypes: bool | None = typer.Option(None, "--rare-prototypes/--all-prototypes", help="SCAN with --resample rare: draw only prototype tuples that contain every word of --rare between them (default: the preset's, else all)"),
    prototype_cut: str | None = typer.Option(None, "--prototype-cut", help="SCAN: Omega's prototypes no longer than the mean length of the training prototypes (mean, the reference's code) or mean + one std (mean+std, the paper's text), or of any length (none); default: the preset's, else mean"),
    batch_size: int | None = typer.Option(None, "--batch-size", help="prototype tuples decoded per round (default: the preset's, else 128)"),
    output: Path | None = typer.Option(None, "-o", "--output", help="samples TSV (x<TAB>y<TAB>logprob)"),
    backend: str | None = typer.Option(None, "--backend", help="onnx | torchscript | cpp (export folders; default onnx) | torch (eager PyTorch: on an export folder, the same samples as the others; default for checkpoints)"),
    test_dropout: bool | None = typer.Option(None, "--test-dropout/--no-test-dropout", help="dropout on the decoder state while sampling (default: the checkpoint's outdrop_test)"),
    raise_temperature: bool = typer.Option(False, "--raise-temperature", help="when 3 rounds accept nothing new, switch greedy/beam to mixed sampling, then raise the temperature by 0.1 (off: the sampler runs as asked)"),
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
    ray: str | None = typer.Option(None, "--ray", help="shard decoding over a Ray cluster at this address ('local': start one here); same file as one process"),
    ray_workers: int | None = typer.Option(None, "--ray-workers", help="Ray actors decoding at once (default: a local cluster's cores, else 2)"),
    data_dir: Path | None = DataDir,
) -> None:
    """Sample unique, novel synthetic data from a generator (optionally rare-token resampled)."""
    from compgen.runtime.sampler import sample

    if checkpoint.is_dir() and test_dropout:
        raise UserError("--test-dropout: exported graphs are deterministic; sample the checkpoint")
    for name, value in (("--n", n), ("--nsamples", nsamples), ("--batch-size", batch_size),
                        ("--threads", threads), ("--max-rounds", max_rounds),
                        ("--beam-width", beam_width)):
        if value is not None and value < 1:
            raise UserError(f"{name} must be >= 1")
    if strategy is not None:
        from compgen.decoding import check_strategy

        check_strategy(strategy)
    from compgen.lm.rerank import LmRanking

    # loads the LM files now: a missing or corrupt model stops before any decoding
    ranking = LmRanking.from_options(lm, lm_weight, lm_side, lm_mix, rerank, min_lm_logprob,
                                     lm_val, data_dir)
    factory = None
    if ray is not None:
        import os

        from compgen.ray_cluster import import_ray
        from compgen.runtime.ray_sampling import RayDecoderFactory

        if ray_workers is not None and ray_workers < 1:
            raise UserError("--ray-workers must be >= 1")
        import_ray()
        address = None if ray in ("", "local") else ray
        factory = RayDecoderFactory(address, ray_workers or (
            (os.cpu_count() or 2) if address is None else 2))
    elif ray_workers is not None:
        raise UserError("--ray-workers needs --ray")
    run = sample(checkpoint, backend, out=output, data_dir=data_dir, lm=ranking,
                 decoder_factory=factory,
                 log=lambda line: err_console.print(line, highlight=False, markup=False),
                 n=n, strategy=strategy, temperature=temperature, resample=resample, rare=rare,
                 nsamples=nsamples, batch_size=batch_size, seed=seed, threads=threads,
                 max_rounds=max_rounds, rare_prototypes=rare_prototypes,
                 prototype_cut=prototype_cut, raise_temperature=raise_temperature or None,
                 test_dropout=test_dropout,
                 beam_width=beam_width, precision=precision)
    if output is None:
        for s in run.samples:
            lm_column = "" if s.lm_logprob is None else f"\t{s.lm_logprob:.4f}"
            console.print(f"{' '.join(s.x)}\t{' '.join(s.y)}\t{s.logprob:.4f}{lm_column}",
                          highlight=False, markup=False, soft_wrap=True)
    decoding = (f" ({run.decode_seconds:.1f} s decoding)" if run.decode_seconds is not None
                else "")
    console.print(f"{len(run.samples)} samples in {run.seconds:.1f} s{decoding}"
                  + (f" -> {output}" if output else ""), highlight=False, markup=False)
    if ranking is not None:
        scorer = ranking.scorer
        console.print(f"{ranking.describe()}: {scorer.sentences} sentences scored in "
                      f"{scorer.seconds:.3f} s ({scorer.sentences / max(scorer.seconds, 1e-9):,.0f}"
                      f" sentences/s, {scorer.seconds / max(run.seconds, 1e-9):.1%} of the "
                      "sampling time)", highlight=False, markup=False)
    from compgen.sample_collection import scan_quality

    quality = scan_quality(run, data_dir)
    if quality:
        console.print(f"novel {quality['novel_share']:.1%}, '{quality['primitive']}' in a new "
                      f"command {quality['uses_primitive_in_new_command_share']:.1%}, correct SCAN "
                      f"pairs {quality['correct_share']:.1%}", highlight=False, markup=False)
