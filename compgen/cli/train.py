"""`compgen train`: R&R generators and the conditional predictor."""

from __future__ import annotations

from pathlib import Path

import torch
import typer

from compgen.cli.common import (
    Columns,
    DataDir,
    DeviceOption,
    XField,
    YField,
    console,
    fields_of,
)
from compgen.data.dataset import open_dataset
from compgen.data.task import task_of
from compgen.device import resolve_device, training_precision, use_tf32
from compgen.errors import UserError
from compgen.training.checkpoint import apply_overrides, load_checkpoint, load_preset
from compgen.training.generator import train_generator
from compgen.training.predictor import train_predictor

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("predictor")
def train_predictor_cmd(
    data: str | None = typer.Option(None, "--data", help="data set name (scan/jump, sigmorphon/spanish/hints-4.0) or file; with --resume: the checkpoint's"),
    config: str | None = typer.Option(None, "--config", help="preset name (seq2seq_scan[_cpu], seq2seq_sig[_cpu], seq2seq_geo) or TOML file (default: seq2seq_sig_cpu for sigmorphon/*, seq2seq_geo for geoquery/*, seq2seq_scan_cpu for scan/* and cogs, settings sized from the data for your own data; with --resume: the checkpoint's)"),
    output: Path = typer.Option(..., "-o", "--output", help="checkpoint file to write (safetensors)"),
    augment: Path | None = typer.Option(None, "--augment", help="augmented samples TSV (x<TAB>y)"),
    p_aug: float | None = typer.Option(None, "--p-aug", help="probability of drawing an augmented example (default: reference value for the data set, else 0 = concatenate)"),
    epochs: int | None = typer.Option(None, "--epochs", help="passes over the training data (default: the preset's); with --resume: train a finished run on to this many"),
    label: str | None = typer.Option(None, "--label", help="system name in result tables (default: augment file stem or 'baseline')"),
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted run from OUTPUT"),
    keep_every: int = typer.Option(0, "--keep-every", help="also keep the checkpoint after every N-th epoch (OUTPUT predictor.pt: predictor-epN.pt), resumable: copy one to OUTPUT and --resume to go back to it when a long run diverges; 0 = only the latest"),
    max_len: int | None = typer.Option(None, "--max-len", help="longest input/output in tokens; longer pairs are cut (counted in a warning) and decoding stops there (default: the preset's; own data: 1.5x its longest)"),
    copy: bool | None = typer.Option(None, "--copy/--no-copy", help="supervised copying of input words into the output (default: the preset's; own data: on when outputs reuse input words)"),
    hidden: int | None = typer.Option(None, "--hidden", help="LSTM hidden size H (default: the preset's)"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads"),
    seed: int = typer.Option(0, "--seed", help="random seed of initialisation, the dev split and the batch order"),
    device: str | None = DeviceOption,
    tf32: bool = typer.Option(False, "--tf32", help="CUDA: TF32 matrix products (faster, 10-bit mantissa)"),
    data_dir: Path | None = DataDir,
    x_field: str | None = XField,
    y_field: str | None = YField,
    columns: str | None = Columns,
) -> None:
    """Train the conditional seq2seq predictor on original (+ augmented) data."""
    dev = resolve_device(device)
    use_tf32(dev, tf32)

    if threads is not None:   # its range: checked before the command starts
        torch.set_num_threads(threads)
    if resume and not output.is_file():
        raise UserError(f"-o {output}: no such checkpoint to --resume (without --resume a new run starts)")
    # the data (without --data, a resumed run's) and the --augment file are read with the
    # fields named here, once the settings (the preset, a resumed run's) are checked
    fields = fields_of(x_field, y_field, columns)
    summary = train_predictor(data, config, output, augment=augment, p_aug=p_aug, seed=seed,
                              data_dir=data_dir, epochs=epochs, resume=resume, label=label,
                              keep_every=keep_every,
                              log=lambda line: console.print(line, highlight=False),
                              device=dev, overrides={"model.max_len": max_len,
                                                     "model.copy_sup": copy,
                                                     "model.hidden": hidden},
                              fields=fields)
    console.print(f"wrote {summary['checkpoint']} ({summary['epochs']} epochs, {summary['n_train']:,} "
                  f"train + {summary['n_augmented']:,} augmented, p_aug {summary['p_aug']}, "
                  f"dev exact match {summary['dev_exact_match']:.4f}, {summary['seconds']} s on "
                  f"{summary['device']}); "
                  f"curve {summary['curve']}", highlight=False)



@commands.command("generator")
def train_generator_cmd(
    data: str | None = typer.Option(None, "--data", help="scan/<split>, sigmorphon/<lang>/hints-<h>.<i>, or your own x<TAB>y file (prototypes retrieved by similarity; the checkpoint records the pairs, so sampling needs no data); with --resume: the checkpoint's"),
    config: str | None = typer.Option(None, "--config", help="preset (recombine_scan[_cpu], recombine_sig[_cpu], recombine_generic_cpu, proto_*, rnnlm_*) or TOML file (default: recombine_sig_cpu for sigmorphon/*, recombine_scan_cpu for scan/*, else recombine_generic_cpu; with --resume: the checkpoint's)"),
    output: Path = typer.Option(..., "-o", "--output", help="checkpoint file to write (safetensors, self-describing)"),
    nproto: int | None = typer.Option(None, "--nproto", help="0, 1 or 2 prototypes"),
    epochs: int | None = typer.Option(None, "--epochs", help="passes over the training neighbourhoods (default: the preset's); with --resume: train a finished run on to this many"),
    vae: bool | None = typer.Option(None, "--vae/--no-vae", help="vMF latent on/off"),
    copy: bool | None = typer.Option(None, "--copy/--no-copy", help="copying on/off"),
    hidden: int | None = typer.Option(None, "--hidden", help="LSTM hidden size H"),
    embed: int | None = typer.Option(None, "--embed", help="embedding size E"),
    attdim: int | None = typer.Option(None, "--attdim", help="attention size A"),
    batch_size: int | None = typer.Option(None, "--batch-size", help="examples per update (default: the preset's)"),
    lr: float | None = typer.Option(None, "--lr", help="Adam learning rate (default: the preset's)"),
    resume: bool = typer.Option(False, "--resume", help="continue an interrupted run from OUTPUT (with --epochs: train a finished run longer)"),
    max_steps: int | None = typer.Option(None, "--max-steps", help="stop once the run has made this many updates in all, counting those before a --resume (resumable)"),
    time_budget: float | None = typer.Option(None, "--time-budget", help="stop after this many seconds (resumable)"),
    threads: int | None = typer.Option(None, "--threads", help="torch CPU threads (default: the cores this process may use)"),
    precision: str | None = typer.Option(None, "--precision", help="auto (bf16 autocast where the CPU has AMX / AVX512-BF16 or the GPU computes bf16, else fp32), fp32 or bf16; the checkpoint stays fp32 (default: the preset's, auto)"),
    device: str | None = DeviceOption,
    tf32: bool = typer.Option(False, "--tf32", help="CUDA: TF32 matrix products (faster, 10-bit mantissa)"),
    quiet: bool = typer.Option(False, "--quiet", help="log lines instead of a progress bar"),
    seed: int | None = typer.Option(None, "--seed", help="random seed of initialisation, batches and dev split (default: the preset's, else 0)"),
    neighborhood: str | None = typer.Option(None, "--neighborhood", help="your own data: long-short (a close first prototype, a short second one holding what it lacks) or long-long (two close prototypes); default: the preset's"),
    similarity: str | None = typer.Option(None, "--similarity", help="your own data: how prototypes are retrieved, levenshtein (token edit distance) or jaccard (token sets); default: the preset's"),
    data_dir: Path | None = DataDir,
    x_field: str | None = XField,
    y_field: str | None = YField,
    columns: str | None = Columns,
) -> None:
    """Train an R&R generator (recomb-0/1/2, optional VAE) on prototype neighbourhoods."""
    # numeric options: checked before the command starts (compgen.cli.common
    # check_train_numbers_first)
    dev = resolve_device(device)
    use_tf32(dev, tf32)
    if precision is not None:
        training_precision(precision, dev)
    for name, value, valid in (("--neighborhood", neighborhood, ("long-short", "long-long")),
                               ("--similarity", similarity, ("levenshtein", "jaccard"))):
        if value is not None and value not in valid:
            raise UserError(f"{name} {value}: unknown (valid: {', '.join(valid)})")
    if resume and not output.is_file():
        raise UserError(f"-o {output}: no such checkpoint to --resume (without --resume a new run starts)")
    saved = load_checkpoint(output, kind="recombine") if resume else None
    data = data or (saved.config.get("data") if saved else None)
    if not data:
        raise UserError("--data is required (unless --resume continues an existing -o checkpoint)")
    if saved is not None and config is None:   # a checkpoint describes its own run
        preset = {k: dict(v) if isinstance(v, dict) else v for k, v in saved.config.items()}
        config = str(output)
    else:
        config = config or task_of(data).default_preset("generator")
        preset = load_preset(config)
    if preset.get("kind", "recombine") != "recombine":
        raise UserError(f"--config {config}: a {preset.get('kind')} (predictor) preset; a generator "
                        "takes recombine_*, proto_* or rnnlm_* presets (compgen presets lists them)")
    cfg = apply_overrides(preset, {
        "model.nproto": nproto, "model.vae": vae, "model.copy": copy, "model.hidden": hidden,
        "model.embed": embed, "model.attdim": attdim, "train.epochs": epochs,
        "train.batch_size": batch_size, "train.lr": lr, "train.seed": seed, "train.threads": threads,
        "train.precision": precision, "train.neighborhood": neighborhood,
        "train.similarity": similarity})
    fields = fields_of(x_field, y_field, columns)
    dataset = open_dataset(data, data_dir, fields)
    result = train_generator(cfg, dataset, output, data_dir=data_dir, resume=resume,
                             epochs=epochs, max_steps=max_steps, time_budget=time_budget,
                             progress=not quiet, device=dev, tf32=tf32,
                             log=lambda line: console.print(line, highlight=False, markup=False))
    state = "finished" if result.finished else "stopped (resume with --resume)"
    ppl = f", dev ppl {result.dev_ppl:.4f}" if result.dev_ppl else ""
    console.print(f"wrote {result.path}: {state} at step {result.steps} ({result.epochs_done:.2f} epochs"
                  f"{ppl}, {result.examples_per_s:.1f} examples/s on {result.device}); curve "
                  f"{result.curve_path}",
                  highlight=False, markup=False)
