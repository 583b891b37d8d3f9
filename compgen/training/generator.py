"""Generator training: the Recombine training loop (presets and the checkpoint format are
in :mod:`compgen.training.checkpoint`, the (x, prototypes) items in :mod:`compgen.training.generator_data`).

The training regime follows the reference (spec §4): Adam, global-norm clipping,
epochs = passes over the (x, prototypes) list, shuffled each epoch; scan: dev perplexity
after every epoch, learning rate x lrdecay after ``patience`` epochs without improvement,
best-dev weights restored at the end. The VAE has no KL weight to schedule: with a fixed
concentration the KL is a constant (reported in the log, §3.4).

Checkpoints are written atomically, so an interrupted run leaves the previous checkpoint
intact, and ``--resume`` continues from it with the same data order and random stream as
an uninterrupted run.
"""

from __future__ import annotations

import csv
import io
import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from compgen.configs import GeneratorTrainConfig, read_section
from compgen.data.dataset import Dataset
from compgen.device import (
    CPU,
    Device,
    autocast,
    resolve_device,
    to_device,
    training_precision,
    use_tf32,
)
from compgen.errors import SettingError, UserError
from compgen.io import atomic_open, keep_torch_compiler_cache
from compgen.models import native
from compgen.models.recombine import RecombineConfig
from compgen.models.scan_training import REFERENCE, TrainingLoss, training_loss
from compgen.training.checkpoint import (
    Checkpoint,
    build_recombine,
    load_checkpoint,
    save_checkpoint,
)
from compgen.training.generator_data import (
    GeneratorData,
    batch_lengths,
    encode_items,
    epoch_batches,
    generator_data,
    make_batch,
)

CURVE_FIELDS = ["step", "epoch", "examples", "loss", "tok_nll", "examples_per_s", "lr", "dev_ppl",
                "elapsed_s"]


@dataclass
class TrainResult:
    path: str
    steps: int
    epochs_done: float
    examples_per_s: float
    last_loss: float
    dev_ppl: float | None
    finished: bool
    curve_path: str
    device: str = "cpu"


def evaluate_ppl(model, encoded: list, variant: str, max_len: int, batch_size: int = 128,
                 limit: int = 1000) -> float:
    """Per-token perplexity exp(sum NLL / tokens) over the first ``limit`` items (the
    reference's neighbourhood-marginal ppl is not reproduced; this tracks progress)."""
    model.eval()
    device = next(model.parameters()).device
    total, tokens = 0.0, 0
    with torch.no_grad():
        for s in range(0, min(limit, len(encoded)), batch_size):
            idx = range(s, min(s + batch_size, limit, len(encoded)))
            target, protos = make_batch(encoded, idx, variant, max_len)
            _, nll, ntok = model.loss(target.to(device), protos.to(device))
            total += float(nll)
            tokens += int(ntok)
    model.train()
    return math.exp(total / max(tokens, 1))


def _curve_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CURVE_FIELDS)
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in CURVE_FIELDS})
    return buf.getvalue()


def _saved_run(out: Path, config: dict, data: str) -> Checkpoint:
    """The checkpoint a --resume continues; a UserError when the run's model config or
    data set differ from it (the new settings would silently not apply)."""
    saved = load_checkpoint(out, kind="recombine")
    changed = [f"model.{k} {saved.config['model'].get(k)} -> {v}"
               for k, v in config.get("model", {}).items()
               if k != "variant" and saved.config["model"].get(k) != v]
    if saved.config.get("data") != data:
        changed.insert(0, f"`data` {saved.config.get('data')} -> {data}")
    if changed:
        raise SettingError(f"{out}: `resume` with a different model config or data set than "
                           f"the checkpoint's ({'; '.join(changed)}); leave them out or write "
                           "to another -o")
    return saved


class _Window:
    """Loss and speed summed over the updates since the last log line."""

    def __init__(self):
        self.reset(time.perf_counter())

    def reset(self, now: float) -> None:
        self.loss, self.tok_nll, self.tokens, self.examples, self.start = 0.0, 0.0, 0, 0, now

    def add(self, loss: float, nll: float, ntok: int, examples: int) -> None:
        self.loss += loss * examples
        self.tok_nll += nll
        self.tokens += ntok
        self.examples += examples


class _GeneratorRun:
    """One training run: model, optimizer, the resumable ``state`` and the progress log."""

    def __init__(self, config: dict, settings: GeneratorTrainConfig, prepared: GeneratorData,
                 vocab, out: Path, seed: int, batch_size: int, saved: Checkpoint | None,
                 log: Callable[[str], None], device: Device = CPU):
        self.config, self.out, self.seed, self.B, self.epochs, self.log = (
            config, out, seed, batch_size, settings.epochs, log)
        self.vocab = vocab
        self.variant = prepared.task
        self.train_enc = encode_items(prepared.train, vocab)
        self.dev_enc = encode_items(prepared.dev, vocab)
        if not self.train_enc:
            raise UserError(f"{config['data']}: no training neighbourhoods")
        self.patience = settings.patience
        self.gradnorm = settings.gradnorm
        self.restore_best = (settings.restore_best if settings.restore_best is not None
                             else self.variant == "scan")
        self.lrdecay = settings.lrdecay
        self.log_every = settings.log_every
        self.ckpt_every = settings.checkpoint_seconds
        self.curve_path = Path(str(out) + ".loss.csv")
        self.length_buckets = settings.length_buckets
        self.lengths = batch_lengths(self.train_enc) if settings.length_buckets else None
        # the levers are CPU work-savers (index bookkeeping on the CPU, compiled CPU loops);
        # on CUDA the padded batch computation of the reference runs
        self.levers = REFERENCE if device.cuda else TrainingLoss(
            settings.unique_prototypes, settings.packed_encoder, settings.pad_chains,
            settings.fused_decoder, settings.native_loops)
        self.prefetch = settings.prefetch
        self.device = device
        self.bf16 = training_precision(settings.precision, device, "[train] precision") == "bf16"

        torch.manual_seed(seed)
        self.model = build_recombine(config, len(vocab)).to(device.torch)
        self.max_len = self.model.cfg.max_len
        self.model.train()
        lr = settings.lr
        # the fused kernel: one pass over all parameters, 5x faster than the per-tensor loop
        keep_torch_compiler_cache()  # before torch makes its cache folder in /tmp
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=lr, fused=True)
        self.state = {"step": 0, "epoch": 0, "batch": 0, "examples": 0, "elapsed": 0.0, "lr": lr,
                      "best_ppl": None, "patience": self.patience, "curve": [], "done": False}
        self.best: dict = {}
        if saved:
            self._restore(saved)
        for group in self.optimizer.param_groups:  # a checkpoint's groups name their kernel
            group.update(fused=True, foreach=None)
        self._set_lr(self.state["lr"])
        self.batches_per_epoch = math.ceil(len(self.train_enc) / batch_size)
        self.last_loss = float("nan")
        self.start = time.perf_counter()
        self.elapsed0 = self.state["elapsed"]

    def elapsed(self) -> float:
        """Seconds of training in all runs so far (resumed runs included)."""
        return self.elapsed0 + time.perf_counter() - self.start

    def _restore(self, saved: Checkpoint) -> None:
        state = self.state
        self.model.load_state_dict(saved.weights)
        if saved.optim:
            try:
                self.optimizer.load_state_dict(saved.optim)
            except (ValueError, KeyError, TypeError, RuntimeError) as exc:
                raise UserError(f"{saved.path}: damaged optimizer state ({exc})") from None
        self.best = saved.best
        for key, value in saved.train_state.items():
            default = state.get(key)
            numbers = isinstance(default, (int, float)) and not isinstance(default, bool)
            if default is not None and not (isinstance(value, type(default)) or (
                    numbers and isinstance(value, (int, float)) and not isinstance(value, bool))):
                raise UserError(f"{saved.path}: damaged training state ({key} = {value!r})")
        state.update(saved.train_state)
        if saved.rng is not None:
            try:
                torch.set_rng_state(saved.rng)
            except (RuntimeError, TypeError) as exc:
                raise UserError(f"{saved.path}: damaged random state ({exc})") from None
        if state["done"] and state["epoch"] < self.epochs:  # a finished run, trained longer
            state["done"] = False
            self.best = self._weights()
            self.log(f"training {self.out} on from epoch {state['epoch']} to {self.epochs}")
        self.log(f"resuming {self.out} at step {state['step']} (epoch {state['epoch']}, "
                 f"batch {state['batch']})")

    def _weights(self) -> dict:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def _set_lr(self, lr: float) -> None:
        for g in self.optimizer.param_groups:
            g["lr"] = lr

    def describe(self, data: str) -> str:
        model = self.model
        return (f"{data} on {self.device}{' (bf16)' if self.bf16 else ''}: "
                f"{len(self.train_enc)} training tuples, {len(self.dev_enc)} dev, vocab "
                f"{len(self.vocab)}, {sum(p.numel() for p in model.parameters()):,} parameters, "
                f"{self.batches_per_epoch} batches/epoch x {self.epochs} epochs"
                + (f", KL (constant) {model.kl():.3f}" if model.vae else ""))

    def save(self, final: bool = False) -> None:
        # a diverged run's NaN weights are never written (over the last good checkpoint)
        for name, tensor in self.model.state_dict().items():
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise SettingError(f"training diverged by step {self.state['step']}: weight "
                                   f"{name} holds NaN or infinite values (`lr` "
                                   f"{self.state['lr']:g}); lower `lr`; "
                                   f"{self.out} keeps its last finite weights, if any")
        self.state["done"] = final
        save_checkpoint(self.out, self.model, self.config, self.vocab, "recombine", self.optimizer,
                        self.best if not final else None, self.state)
        with atomic_open(self.curve_path, "w", encoding="utf-8") as f:
            f.write(_curve_csv(self.state["curve"]))

    def epoch_batches(self, epoch: int) -> list:
        lengths = self.lengths if self.lengths is not None else [0] * len(self.train_enc)
        return epoch_batches(lengths, self.B, self.seed, epoch, self.length_buckets)

    def collate(self, idx):
        return to_device(make_batch(self.train_enc, idx, self.variant, self.max_len), self.device)

    def update(self, idx, batch, window: _Window) -> None:
        """One Adam step on the examples ``idx``, collated as ``batch``."""
        target, protos = batch
        # bf16 autocast runs the matmuls in bf16; weights and gradients stay fp32
        with autocast(self.device, self.bf16):
            loss, nll, ntok = training_loss(self.model, target, protos, self.levers)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.gradnorm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.gradnorm, foreach=True)
        self.optimizer.step()
        self.state["step"] += 1
        self.state["batch"] += 1
        self.state["examples"] += len(idx)
        self.last_loss = float(loss.detach())
        window.add(self.last_loss, float(nll), int(ntok), len(idx))

    def log_window(self, window: _Window, progress) -> None:
        state, now = self.state, time.perf_counter()
        speed = window.examples / max(now - window.start, 1e-9)
        loss = window.loss / window.examples
        state["curve"].append({
            "step": state["step"],
            "epoch": state["epoch"] + state["batch"] / self.batches_per_epoch,
            "examples": state["examples"], "loss": loss,
            "tok_nll": window.tok_nll / max(window.tokens, 1), "examples_per_s": speed,
            "lr": state["lr"], "elapsed_s": self.elapsed()})
        if progress is not None:
            progress.update(loss=f"{loss:.3f}", speed=f"{speed:.0f}")
        else:
            self.log(f"step {state['step']} epoch {state['epoch'] + 1} loss {loss:.4f} "
                     f"{speed:.0f} ex/s")
        window.reset(now)

    def end_epoch(self) -> None:
        """Dev perplexity, learning-rate decay on a plateau, best-dev weights (scan)."""
        state = self.state
        ppl = (evaluate_ppl(self.model, self.dev_enc, self.variant, self.max_len)
               if self.dev_enc else None)
        state["epoch"] += 1
        state["batch"] = 0
        if ppl is None:
            return
        state["curve"].append({"step": state["step"], "epoch": state["epoch"],
                               "examples": state["examples"], "dev_ppl": ppl, "lr": state["lr"],
                               "elapsed_s": self.elapsed()})
        self.log(f"epoch {state['epoch']}: dev ppl {ppl:.4f}")
        if self.variant != "scan":
            return
        best_ppl = state["best_ppl"]
        if best_ppl is not None and ppl > best_ppl - 0.0025:
            state["patience"] -= 1
            if state["patience"] == 0:
                state["lr"] *= self.lrdecay
                self._set_lr(state["lr"])
                state["patience"] = self.patience
                self.log(f"lr -> {state['lr']:g}")
        else:
            state["patience"] = self.patience
        if best_ppl is None or ppl < best_ppl:
            state["best_ppl"] = ppl
            if self.restore_best:
                self.best = self._weights()

    def finish(self, finished: bool) -> None:
        """Final checkpoint (best-dev weights restored) or a resumable one."""
        if finished and not self.state["done"]:
            if self.restore_best and self.best:
                self.model.load_state_dict(self.best)
                self.log(f"restored the best dev weights (ppl {self.state['best_ppl']:.4f})")
            self.save(final=True)
        elif not finished:
            self.save()
            self.log(f"stopped at step {self.state['step']} (resume with --resume)")


class _Progress:
    """A rich progress bar over all batches of the run."""

    def __init__(self, run: _GeneratorRun):
        state = run.state
        self.bar = Progress(TextColumn("[bold]train[/] epoch {task.fields[epoch]}"), BarColumn(),
                            MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"),
                            TextColumn("{task.fields[speed]} ex/s"), TimeElapsedColumn(),
                            transient=False)
        self.bar.start()
        self.task = self.bar.add_task(
            "train", total=run.epochs * run.batches_per_epoch,
            completed=state["epoch"] * run.batches_per_epoch + state["batch"],
            epoch=state["epoch"] + 1, loss="-", speed="-")

    def update(self, **fields) -> None:
        self.bar.update(self.task, **fields)

    def stop(self) -> None:
        self.bar.stop()


def _run_epochs(run: _GeneratorRun, max_steps: int | None, time_budget: float | None,
                progress: _Progress | None) -> bool:
    """Train until the epochs are done or a limit stops the run; True if a limit did."""
    loops = native.loops() if run.levers.native_loops else None
    with ThreadPoolExecutor(1) as pool, native.denormals_flushed(loops):
        return _run_batches(run, max_steps, time_budget, progress, pool if run.prefetch else None)


def _run_batches(run: _GeneratorRun, max_steps: int | None, time_budget: float | None,
                 progress: _Progress | None, pool: ThreadPoolExecutor | None) -> bool:
    """``_run_epochs``; with a ``pool``, the next batch is collated there while the current
    one trains (torch releases the GIL in its kernels)."""
    state = run.state
    last_ckpt = time.perf_counter()
    window = _Window()
    while state["epoch"] < run.epochs and not state["done"]:
        batches = run.epoch_batches(state["epoch"])
        pending = None
        while state["batch"] < run.batches_per_epoch:
            if max_steps is not None and state["step"] >= max_steps:
                return True
            if time_budget is not None and time.perf_counter() - run.start >= time_budget:
                return True
            idx = batches[state["batch"]]
            batch = pending.result() if pending is not None else run.collate(idx)
            following = state["batch"] + 1
            pending = (pool.submit(run.collate, batches[following])
                       if pool is not None and following < len(batches) else None)
            run.update(idx, batch, window)
            if state["step"] % run.log_every == 0:
                run.log_window(window, progress)
            if progress is not None:
                progress.update(advance=1)
            if time.perf_counter() - last_ckpt >= run.ckpt_every:
                state["elapsed"] = run.elapsed()
                run.save()
                last_ckpt = time.perf_counter()
        run.end_epoch()
        state["elapsed"] = run.elapsed()
        run.save()
        last_ckpt = time.perf_counter()
    return False


def check_stops(max_steps, time_budget) -> None:
    """``max_steps`` an integer >= 0, ``time_budget`` a finite number of seconds > 0 (NaN
    never stops a run, -1 stops it before its first step: both are mistakes)."""
    if max_steps is not None and (isinstance(max_steps, bool) or not isinstance(max_steps, int)
                                  or max_steps < 0):
        raise SettingError(f"`max_steps` {max_steps!r}: must be an integer >= 0")
    if time_budget is not None and not (isinstance(time_budget, int | float)
                                        and math.isfinite(time_budget) and time_budget > 0):
        raise SettingError(f"`time_budget` {time_budget!r}: must be a finite number of "
                           "seconds > 0")


def train_generator(config: dict, data: Dataset | str, out, *, data_dir=None,
                    resume: bool = False,
                    max_steps: int | None = None, time_budget: float | None = None,
                    epochs: int | None = None, progress: bool = True,
                    log: Callable[[str], None] = print,
                    prepared: GeneratorData | None = None, device: str | Device | None = None,
                    tf32: bool = False) -> TrainResult:
    """Train a Recombine generator on neighbourhoods of ``data`` (a Dataset, or a name or
    path read here); write ``out`` (checkpoint) and ``out``.loss.csv. ``time_budget`` is in
    seconds of this run.

    ``epochs`` matters when resuming: the run then trains until this many epochs instead of
    the saved run's count, which also reopens a finished run to train it longer (it goes on
    from the saved final weights, with their optimizer state and learning rate).
    ``device``: ``compgen.device.resolve_device``'s (default: $COMPGEN_DEVICE, else auto);
    ``tf32``: TF32 matrix products on CUDA."""
    out = Path(out)
    check_stops(max_steps, time_budget)
    device = resolve_device(device)
    use_tf32(device, tf32)
    given = read_section(GeneratorTrainConfig, config.get("train", {}), "[train]")
    if not (isinstance(given.lr, int | float) and math.isfinite(given.lr) and given.lr > 0):
        raise SettingError(f"`lr` {given.lr}: must be a positive finite learning rate")
    # seed, batch size and threads are this run's (given) settings, also on resume
    # threads default to the cores this process may use (torch's default may differ)
    torch.set_num_threads(given.threads or len(os.sched_getaffinity(0)))
    training_precision(given.precision, device, "[train] precision")  # refused before any work

    name = data.name if isinstance(data, Dataset) else str(data)
    saved = _saved_run(out, config, name) if resume and out.is_file() else None
    if saved:
        config = saved.config  # keep the original run's settings (lr, epochs, ...)
    settings = read_section(GeneratorTrainConfig, config.get("train", {}), "[train]")
    # given epochs win over the config's, also on resume (train a finished run longer)
    if epochs is not None:
        if epochs < 1:
            raise SettingError(f"`epochs` must be >= 1 (got {epochs})")
        settings = replace(settings, epochs=epochs)
    model_cfg = read_section(RecombineConfig, config.get("model", {}), "[model]",
                             skip=("vocab_size",))
    prepared = prepared or generator_data(data, model_cfg.nproto, given.seed,
                                          settings.dev_fraction, data_dir, settings.neighborhood,
                                          settings.similarity, settings.max_missing)
    config = {**config, "train": {**config.get("train", {}), "epochs": settings.epochs},
              "kind": "recombine", "data": name}
    if prepared.snapshot is not None:  # user data: what sampling needs, in the checkpoint
        config["data_snapshot"] = prepared.snapshot
    config["model"] = {**config["model"], "variant": prepared.task}

    run = _GeneratorRun(config, settings, prepared, saved.vocab if saved else prepared.vocab, out,
                        given.seed, given.batch_size, saved, log, device)
    log(run.describe(name))
    state = run.state
    examples0 = state["examples"]
    bar = _Progress(run) if progress and not state["done"] else None
    try:
        stopped = _run_epochs(run, max_steps, time_budget, bar)
    finally:
        if bar is not None:
            bar.stop()

    finished = state["done"] or (not stopped and state["epoch"] >= settings.epochs)
    state["elapsed"] = run.elapsed()
    run.finish(finished)
    run_seconds = time.perf_counter() - run.start  # this run, dev evaluations included
    speed = (state["examples"] - examples0) / run_seconds if run_seconds > 0 else 0.0
    epochs_done = state["epoch"] + state["batch"] / run.batches_per_epoch
    return TrainResult(str(out), state["step"], epochs_done, speed, run.last_loss,
                       state["best_ppl"], finished, str(run.curve_path),
                       str(device) + (" bf16" if run.bf16 else ""))
