"""Training: presets, self-describing checkpoints, the generator training loop.

Presets are plain TOML files in ``compgen/configs`` with sections ``[model]``,
``[train]`` and ``[sample]`` plus a top-level ``kind``; CLI options override single keys.

A checkpoint is ONE safetensors file (any name, e.g. ``recomb2.pt``): tensors
``model.*`` (weights), ``optim.*`` (Adam moments), ``best.*`` (best-dev weights while
training), ``rng.torch``; string metadata ``format``, ``kind``, ``config`` (JSON),
``vocab`` (JSON), ``train_state`` (JSON: step, epoch, position, lr, best ppl, loss
curve). Loading never executes code. Files are written atomically, so an interrupted
run leaves the previous checkpoint intact, and ``--resume`` continues from it with the
same data order and random stream as an uninterrupted run.

The training regime follows the reference (spec §4): Adam, global-norm clipping,
epochs = passes over the (x, prototypes) list, shuffled each epoch; scan: dev perplexity
after every epoch, learning rate x lrdecay after ``patience`` epochs without improvement,
best-dev weights restored at the end. The VAE has no KL weight to schedule: with a fixed
concentration the KL is a constant (reported in the log, §3.4).
"""

from __future__ import annotations

import copy
import csv
import io
import json
import math
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl
import torch

from compgen.data.vocab import Vocab
from compgen.errors import UserError
from compgen.io import atomic_open

CONFIG_DIR = Path(__file__).parent / "configs"
FORMAT = "compgen-checkpoint-1"


# ------------------------------------------------------------------ presets

def preset_names() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))


def load_preset(name_or_path: str) -> dict:
    """A preset by name (``recombine_scan``) or a TOML file path."""
    path = Path(name_or_path)
    if not path.is_file():
        path = CONFIG_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        raise UserError(f"unknown config '{name_or_path}' (presets: {', '.join(preset_names())})")
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None


def apply_overrides(config: dict, overrides: dict) -> dict:
    """``{"model.nproto": 1}`` -> config with that key replaced (None values ignored)."""
    config = copy.deepcopy(config)
    for key, value in overrides.items():
        if value is None:
            continue
        section, _, name = key.partition(".")
        config.setdefault(section, {})[name] = value
    return config


# ------------------------------------------------------------------ checkpoints

@dataclass
class Checkpoint:
    kind: str
    config: dict
    vocab: Vocab
    weights: dict
    optim: dict = field(default_factory=dict)
    best: dict = field(default_factory=dict)
    rng: torch.Tensor | None = None
    train_state: dict = field(default_factory=dict)
    path: str = ""


def _flatten_optimizer(state: dict) -> tuple[dict, list]:
    tensors = {}
    for idx, slots in state["state"].items():
        for name, value in slots.items():
            t = value if torch.is_tensor(value) else torch.tensor(value)
            tensors[f"optim.{idx}.{name}"] = t.detach().clone().contiguous()
    return tensors, state["param_groups"]


def _unflatten_optimizer(tensors: dict, groups: list) -> dict:
    state: dict = {}
    for key, value in tensors.items():
        idx, name = key.split(".", 1)
        state.setdefault(int(idx), {})[name] = value
    return {"state": state, "param_groups": groups}


def save_checkpoint(path, model: torch.nn.Module, config: dict, vocab: Vocab, kind: str,
                    optimizer: torch.optim.Optimizer | None = None, best: dict | None = None,
                    train_state: dict | None = None) -> None:
    """Write a self-describing checkpoint atomically (generic: any model kind)."""
    from safetensors.torch import save

    tensors = {f"model.{k}": v.detach().contiguous().clone() for k, v in model.state_dict().items()}
    groups: list = []
    if optimizer is not None:
        opt_tensors, groups = _flatten_optimizer(optimizer.state_dict())
        tensors.update(opt_tensors)
    for k, v in (best or {}).items():
        tensors[f"best.{k}"] = v.detach().contiguous().clone()
    tensors["rng.torch"] = torch.get_rng_state()
    metadata = {"format": FORMAT, "kind": kind, "config": json.dumps(config),
                "vocab": vocab.to_json(), "optim_groups": json.dumps(groups),
                "train_state": json.dumps(train_state or {})}
    blob = save(tensors, metadata=metadata)
    with atomic_open(path, "wb") as f:
        f.write(blob)


def default_preset(kind: str, data: str) -> str:
    """The preset a command uses without --config: the CPU size of the data set's task
    (``recombine_sig_cpu`` for SIGMORPHON, ``recombine_scan_cpu`` otherwise; ``seq2seq_*``
    for predictors)."""
    task = "sig" if str(data).startswith("sigmorphon") else "scan"
    return f"{'recombine' if kind == 'generator' else 'seq2seq'}_{task}_cpu"


def load_checkpoint(path, kind: str | None = None) -> Checkpoint:
    """Read a checkpoint; ``kind`` (e.g. "recombine") rejects checkpoints of other kinds."""
    from safetensors import SafetensorError
    from safetensors.torch import load

    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such checkpoint")
    try:
        raw = path.read_bytes()
        header_len = int.from_bytes(raw[:8], "little")
        header = json.loads(raw[8:8 + header_len])
        metadata = header.get("__metadata__") or {}
        tensors = load(raw)
    except (SafetensorError, ValueError, UnicodeDecodeError, json.JSONDecodeError, MemoryError):
        raise UserError(f"{path}: not a compgen checkpoint (not a safetensors file)") from None
    if kind is not None and metadata.get("kind") and metadata.get("kind") != kind:
        raise UserError(f"{path}: a '{metadata.get('kind')}' checkpoint, expected '{kind}'")
    if metadata.get("format") != FORMAT:
        raise UserError(f"{path}: not a compgen checkpoint (format {metadata.get('format')!r})")
    split: dict[str, dict] = {"model": {}, "optim": {}, "best": {}, "rng": {}}
    for key, value in tensors.items():
        head, _, rest = key.partition(".")
        split[head][rest] = value
    groups = json.loads(metadata.get("optim_groups", "[]"))
    return Checkpoint(
        kind=metadata["kind"], config=json.loads(metadata["config"]),
        vocab=Vocab.from_json(metadata["vocab"], str(path)), weights=split["model"],
        optim=_unflatten_optimizer(split["optim"], groups) if split["optim"] else {},
        best=split["best"], rng=split["rng"].get("torch"),
        train_state=json.loads(metadata.get("train_state", "{}")), path=str(path))


def build_recombine(config: dict, vocab_size: int):
    from compgen.models.recombine import Recombine, RecombineConfig

    try:
        cfg = RecombineConfig.from_dict({**config.get("model", {}), "vocab_size": vocab_size})
    except (TypeError, ValueError) as exc:
        raise UserError(f"bad model config: {exc}") from None
    return Recombine(cfg)


def load_generator(path):
    """(model in eval mode, vocab, config) from a generator checkpoint."""
    ckpt = load_checkpoint(path, kind="recombine")
    model = build_recombine(ckpt.config, len(ckpt.vocab))
    model.load_state_dict(ckpt.weights)
    model.eval()
    return model, ckpt.vocab, ckpt.config


# ------------------------------------------------------------------ training data

@dataclass
class GeneratorData:
    """Everything training and sampling need: (x, prototypes) lists, vocab, Omega."""
    vocab: Vocab
    train: list          # [(x tokens, [proto tokens, ...]), ...]
    dev: list
    task: str            # "scan" | "sig"
    split_name: str
    table: pl.DataFrame  # the example table (train/test/... rows)


def _scan_generator_data(table: pl.DataFrame, split_name: str, nproto: int, seed: int,
                         dev_fraction: float) -> GeneratorData:
    from compgen.neighborhoods import prototype_sets, scan_neighborhood

    train_rows = table.filter(pl.col("split") == "train")
    vocab = Vocab.from_table(train_rows)
    triples = scan_neighborhood(table, split_name, seed)
    sets = prototype_sets(triples, nproto)
    items = list(zip(sets["x"].to_list(), sets["protos"].to_list()))
    # the reference: shuffle, floor(0.9 n) train / floor(0.1 n) dev
    order = np.random.default_rng(seed).permutation(len(items))
    n_train = math.floor((1 - dev_fraction) * len(items))
    n_dev = math.floor(dev_fraction * len(items))
    train = [items[i] for i in order[:n_train]]
    dev = [items[i] for i in order[n_train:n_train + n_dev]]
    return GeneratorData(vocab, train, dev, "scan", split_name, table)


def sig_triples(table: pl.DataFrame, rows: pl.DataFrame, nproto: int) -> list:
    """Stored few-shot neighbourhoods -> (x, prototypes) items, no deduplication: each
    item yields one entry per stored pair (0-proto: x four times; 1-proto: (x, xp))."""
    from compgen.neighborhoods import generative_datum

    data = [generative_datum(x, y) for x, y in zip(table["x"].to_list(), table["y"].to_list())]
    items = []
    for x, y, pairs in zip(rows["x"].to_list(), rows["y"].to_list(), rows["neighbors"].to_list()):
        d = generative_datum(x, y)
        for i1, i2 in pairs:
            items.append((d, [data[i1], data[i2]][:nproto]))
    return items


def _sig_generator_data(table: pl.DataFrame, name: str, nproto: int) -> GeneratorData:
    if "neighbors" not in table.columns:
        raise UserError(f"{name}: no stored neighbourhoods (use a few-shot split such as "
                        "sigmorphon/turkish/hints-8.0)")
    vocab = Vocab.from_table(table)  # the reference builds it from all items of the split
    train = sig_triples(table, table.filter(pl.col("split") == "train"), nproto)
    dev_split = "val_hard" if "val_hard" in table["split"].unique().to_list() else "train"
    dev = sig_triples(table, table.filter(pl.col("split") == dev_split), nproto)
    return GeneratorData(vocab, train, dev, "sig", name, table)


def generator_data(data: str, nproto: int, seed: int, dev_fraction: float = 0.1,
                   data_dir=None) -> GeneratorData:
    from compgen.data import load_dataset

    table = load_dataset(data, data_dir)
    if data.startswith("scan/"):
        return _scan_generator_data(table, data.split("/", 1)[1], nproto, seed, dev_fraction)
    if data.startswith("sigmorphon/"):
        return _sig_generator_data(table, data, nproto)
    raise UserError(f"--data {data}: generators train on scan/<split> or "
                    "sigmorphon/<lang>/hints-<h>.<i>")


def encode_items(items: list, vocab: Vocab) -> list:
    return [(vocab.encode(x), [vocab.encode(p) for p in protos]) for x, protos in items]


def make_batch(encoded: list, idx, variant: str, max_len: int):
    from compgen.models.recombine import collate_prototypes, collate_targets

    chosen = [encoded[i] for i in idx]
    target = collate_targets([x for x, _ in chosen], variant, max_len)
    protos = collate_prototypes([p for _, p in chosen], variant, max_len)
    return target, protos


# ------------------------------------------------------------------ training loop

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


def evaluate_ppl(model, encoded: list, variant: str, max_len: int, batch_size: int = 128,
                 limit: int = 1000) -> float:
    """Per-token perplexity exp(sum NLL / tokens) over the first ``limit`` items (the
    reference's neighbourhood-marginal ppl is not reproduced; this tracks progress)."""
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for s in range(0, min(limit, len(encoded)), batch_size):
            idx = range(s, min(s + batch_size, limit, len(encoded)))
            target, protos = make_batch(encoded, idx, variant, max_len)
            _, nll, ntok = model.loss(target, protos)
            total += float(nll)
            tokens += int(ntok)
    model.train()
    return math.exp(total / max(tokens, 1))


def _curve_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    fields = ["step", "epoch", "examples", "loss", "tok_nll", "examples_per_s", "lr", "dev_ppl",
              "elapsed_s"]
    w = csv.DictWriter(buf, fieldnames=fields)
    w.writeheader()
    for r in rows:
        w.writerow({k: r.get(k, "") for k in fields})
    return buf.getvalue()


def train_generator(config: dict, data: str, out, *, data_dir=None, resume: bool = False,
                    max_steps: int | None = None, time_budget: float | None = None,
                    epochs: int | None = None, progress: bool = True,
                    log: Callable[[str], None] = print,
                    prepared: GeneratorData | None = None) -> TrainResult:
    """Train a Recombine generator on neighbourhoods of ``data``; write ``out``
    (checkpoint) and ``out``.loss.csv. ``time_budget`` is in seconds of this run.

    ``epochs`` matters when resuming: the run then trains until this many epochs instead of
    the saved run's count, which also reopens a finished run to train it longer (it goes on
    from the saved final weights, with their optimizer state and learning rate)."""
    out = Path(out)
    tcfg = config.get("train", {})
    seed = int(tcfg.get("seed", 0))
    B = int(tcfg.get("batch_size", 32))
    threads = tcfg.get("threads")
    if threads:
        torch.set_num_threads(int(threads))

    saved = None
    if resume and out.is_file():
        saved = load_checkpoint(out, kind="recombine")
        changed = [f"model.{k} {saved.config['model'].get(k)} -> {v}"
                   for k, v in config.get("model", {}).items()
                   if k != "variant" and saved.config["model"].get(k) != v]
        if saved.config.get("data") != data:
            changed.insert(0, f"--data {saved.config.get('data')} -> {data}")
        if changed:
            raise UserError(f"{out}: --resume with a different model config or data set than "
                            f"the checkpoint's ({'; '.join(changed)}); leave them out or write "
                            "to another -o")
        config = saved.config  # keep the original run's settings (lr, epochs, ...)
        tcfg = config["train"]
    # given epochs win over the config's, also on resume (train a finished run longer)
    epochs = int(epochs if epochs is not None else tcfg.get("epochs", 1))
    if B < 1 or epochs < 1:
        raise UserError("batch size and epochs must be >= 1")
    tcfg = {**tcfg, "epochs": epochs}
    config = {**config, "train": tcfg}
    nproto = int(config["model"].get("nproto", 2))
    prepared = prepared or generator_data(data, nproto, seed, float(tcfg.get("dev_fraction", 0.1)),
                                          data_dir)
    vocab = saved.vocab if saved else prepared.vocab
    config = {**config, "kind": "recombine", "data": data}
    config["model"] = {**config["model"], "variant": prepared.task}
    variant = prepared.task
    max_len = int(config["model"].get("max_len", 45))
    train_enc = encode_items(prepared.train, vocab)
    dev_enc = encode_items(prepared.dev, vocab)
    if not train_enc:
        raise UserError(f"{data}: no training neighbourhoods")

    torch.manual_seed(seed)
    model = build_recombine(config, len(vocab))
    model.train()
    lr = float(tcfg.get("lr", 0.002))
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    state = {"step": 0, "epoch": 0, "batch": 0, "examples": 0, "elapsed": 0.0, "lr": lr,
             "best_ppl": None, "patience": int(tcfg.get("patience", 4)), "curve": [],
             "done": False}
    best: dict = {}
    if saved:
        model.load_state_dict(saved.weights)
        if saved.optim:
            optimizer.load_state_dict(saved.optim)
        best = saved.best
        state.update(saved.train_state)
        if saved.rng is not None:
            torch.set_rng_state(saved.rng)
        if state["done"] and state["epoch"] < epochs:  # a finished run, trained longer
            state["done"] = False
            best = {k: v.detach().clone() for k, v in model.state_dict().items()}
            log(f"training {out} on from epoch {state['epoch']} to {epochs}")
        log(f"resuming {out} at step {state['step']} (epoch {state['epoch']}, "
            f"batch {state['batch']})")
    for g in optimizer.param_groups:
        g["lr"] = state["lr"]

    n = len(train_enc)
    batches_per_epoch = math.ceil(n / B)
    gradnorm = float(tcfg.get("gradnorm", 0.0))
    restore_best = bool(tcfg.get("restore_best", variant == "scan"))
    lrdecay = float(tcfg.get("lrdecay", 0.5))
    log_every = int(tcfg.get("log_every", 50))
    ckpt_every = float(tcfg.get("checkpoint_seconds", 120))
    log(f"{data}: {n} training tuples, {len(dev_enc)} dev, vocab {len(vocab)}, "
        f"{sum(p.numel() for p in model.parameters()):,} parameters, "
        f"{batches_per_epoch} batches/epoch x {epochs} epochs"
        + (f", KL (constant) {model.kl():.3f}" if model.vae else ""))

    def save(final: bool = False):
        state["done"] = final
        save_checkpoint(out, model, config, vocab, "recombine", optimizer,
                        best if not final else None, state)
        with atomic_open(curve_path, "w", encoding="utf-8") as f:
            f.write(_curve_csv(state["curve"]))

    curve_path = Path(str(out) + ".loss.csv")
    start = time.perf_counter()
    elapsed0, examples0 = state["elapsed"], state["examples"]
    last_ckpt = start
    window_loss, window_tok_nll, window_tok, window_ex, window_t = 0.0, 0.0, 0, 0, time.perf_counter()
    last_loss = float("nan")
    stopped = False
    prog = None
    if progress and not state["done"]:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )
        prog = Progress(TextColumn("[bold]train[/] epoch {task.fields[epoch]}"), BarColumn(),
                        MofNCompleteColumn(), TextColumn("loss {task.fields[loss]}"),
                        TextColumn("{task.fields[speed]} ex/s"), TimeElapsedColumn(),
                        transient=False)
        prog.start()
        task = prog.add_task("train", total=epochs * batches_per_epoch,
                             completed=state["epoch"] * batches_per_epoch + state["batch"],
                             epoch=state["epoch"] + 1, loss="-", speed="-")
    try:
        while state["epoch"] < epochs and not state["done"]:
            order = np.random.default_rng([seed, state["epoch"]]).permutation(n)
            while state["batch"] < batches_per_epoch:
                if max_steps is not None and state["step"] >= max_steps:
                    stopped = True
                    break
                if time_budget is not None and time.perf_counter() - start >= time_budget:
                    stopped = True
                    break
                idx = order[state["batch"] * B:(state["batch"] + 1) * B]
                target, protos = make_batch(train_enc, idx, variant, max_len)
                loss, nll, ntok = model.loss(target, protos)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if gradnorm > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), gradnorm)
                optimizer.step()
                state["step"] += 1
                state["batch"] += 1
                state["examples"] += len(idx)
                last_loss = float(loss.detach())
                window_loss += last_loss * len(idx)
                window_tok_nll += float(nll)
                window_tok += int(ntok)
                window_ex += len(idx)
                if state["step"] % log_every == 0:
                    now = time.perf_counter()
                    speed = window_ex / max(now - window_t, 1e-9)
                    state["curve"].append({
                        "step": state["step"], "epoch": state["epoch"] + state["batch"] / batches_per_epoch,
                        "examples": state["examples"], "loss": window_loss / window_ex,
                        "tok_nll": window_tok_nll / max(window_tok, 1), "examples_per_s": speed,
                        "lr": state["lr"], "elapsed_s": elapsed0 + now - start})
                    if prog is not None:
                        prog.update(task, loss=f"{window_loss / window_ex:.3f}", speed=f"{speed:.0f}")
                    else:
                        log(f"step {state['step']} epoch {state['epoch'] + 1} loss "
                            f"{window_loss / window_ex:.4f} {speed:.0f} ex/s")
                    window_loss, window_tok_nll, window_tok, window_ex, window_t = 0.0, 0.0, 0, 0, now
                if prog is not None:
                    prog.update(task, advance=1)
                if time.perf_counter() - last_ckpt >= ckpt_every:
                    state["elapsed"] = elapsed0 + time.perf_counter() - start
                    save()
                    last_ckpt = time.perf_counter()
            if stopped:
                break
            # end of epoch: dev perplexity, lr decay on a plateau, best-dev weights
            ppl = evaluate_ppl(model, dev_enc, variant, max_len) if dev_enc else None
            state["epoch"] += 1
            state["batch"] = 0
            if ppl is not None:
                state["curve"].append({"step": state["step"], "epoch": state["epoch"],
                                       "examples": state["examples"], "dev_ppl": ppl,
                                       "lr": state["lr"],
                                       "elapsed_s": elapsed0 + time.perf_counter() - start})
                log(f"epoch {state['epoch']}: dev ppl {ppl:.4f}")
                if variant == "scan":
                    best_ppl = state["best_ppl"]
                    if best_ppl is not None and ppl > best_ppl - 0.0025:
                        state["patience"] -= 1
                        if state["patience"] == 0:
                            state["lr"] *= lrdecay
                            for g in optimizer.param_groups:
                                g["lr"] = state["lr"]
                            state["patience"] = int(tcfg.get("patience", 4))
                            log(f"lr -> {state['lr']:g}")
                    else:
                        state["patience"] = int(tcfg.get("patience", 4))
                    if best_ppl is None or ppl < best_ppl:
                        state["best_ppl"] = ppl
                        if restore_best:
                            best = {k: v.detach().clone() for k, v in model.state_dict().items()}
            state["elapsed"] = elapsed0 + time.perf_counter() - start
            save()
            last_ckpt = time.perf_counter()
    finally:
        if prog is not None:
            prog.stop()

    finished = state["done"] or (not stopped and state["epoch"] >= epochs)
    state["elapsed"] = elapsed0 + time.perf_counter() - start
    if finished and not state["done"]:
        if restore_best and best:
            model.load_state_dict(best)
            log(f"restored the best dev weights (ppl {state['best_ppl']:.4f})")
        save(final=True)
    elif not finished:
        save()
        log(f"stopped at step {state['step']} (resume with --resume)")
    run_seconds = time.perf_counter() - start  # this run, dev evaluations included
    speed = (state["examples"] - examples0) / run_seconds if run_seconds > 0 else 0.0
    return TrainResult(str(out), state["step"], state["epoch"] + state["batch"] / batches_per_epoch,
                       speed, last_loss, state["best_ppl"], finished, str(curve_path))
