"""Training the conditional predictor (``models/seq2seq.py``) on original + augmented data,
as the reference's conditional run does it.

* Data: the training split, deduplicated. SCAN: shuffled once and cut 95 % / 5 % into
  train and dev. Morphology (a table with a ``tags`` column): the model reads *analysis*
  pairs (form chars -> lemma chars + tags); dev = ``val_hard`` (PST) when present.
  Augmented samples (TSV ``x<TAB>y`` in the generators' order; morphology samples are
  reinflection pairs and are turned around the same way) are deduplicated too. Pairs
  longer than ``max_len`` are cut, as the reference does, or left out with
  ``[train] drop_long_augmented`` (a cut target has no end token).
* Mixing: with ``p_aug > 0`` every drawn example comes from the augmented list with
  probability ``p_aug``, otherwise from the original list (each list shuffled once and
  cycled); an epoch is ``floor(|train| / (1 - p_aug) / B)`` batches. The reference uses
  p_aug 0.01 for SCAN jump and 0.2 for around_right (GECA's own recipe: 0.3). With
  ``p_aug = 0`` (morphology) the two lists are concatenated, shuffled once and cycled;
  an epoch is ``ceil(n / B)`` batches (epochs are not aligned to passes).
* Loss: ``Seq2Seq.loss``'s, computed over packed decoder steps
  (``models/seq2seq_training.py``; 1.6x faster at H 512 on two threads).
  ``packed_decoder = false`` runs ``Seq2Seq.loss`` itself.
* Schedule: Adam; global-norm clipping when ``gradnorm > 0``; batches whose loss is not
  finite or exactly 0 are skipped; once, at epoch ``epochs // 2``, lr *= ``gamma`` (when
  > 0); after every epoch the dev exact match is measured: an improvement above 1e-4
  resets the patience, otherwise the patience counts down and at 0 the lr is multiplied
  by ``lrdecay`` (``patience = 0`` turns this off). The final model is the last epoch's
  (the reference never restores the best one); ``restore_best = true`` ends with the
  weights of the epoch with the best dev exact match instead (kept in the checkpoint's
  ``best.*`` tensors while training, so a resumed run keeps them).
* Checkpoint: the project's format (``compgen.training.checkpoint.save_checkpoint``: one safetensors
  file, loading executes no code) of kind "seq2seq", holding the model and training
  config, the run description, the vocabulary and the learning curve. It is rewritten
  atomically after every epoch together with the optimizer, RNG and batch-stream state,
  so ``resume=True`` continues an interrupted run; the final file drops the optimizer.
"""

from __future__ import annotations

import dataclasses
import math
import time
import tomllib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import polars as pl
import torch

from compgen.configs import PredictorTrainConfig
from compgen.data import (
    geoquery,
    keeps_own_dev,
    refuse_overwriting_data,
)
from compgen.data.dataset import Dataset, open_dataset
from compgen.data.files import Fields, read_pairs_file, source_record
from compgen.data.resample import unique_pairs
from compgen.data.task import task_of
from compgen.data.vocab import Vocab
from compgen.device import Device, resolve_device, to_device
from compgen.errors import SettingError, UserError, read_text
from compgen.io import atomic_open, keep_torch_compiler_cache, refuse_overwriting_inputs
from compgen.models.metrics import predict, score_predictions
from compgen.models.seq2seq import Seq2Seq, Seq2SeqConfig, collate
from compgen.models.seq2seq_training import packed_loss
from compgen.training.checkpoint import (
    apply_overrides,
    check_preset,
    load_checkpoint,
    save_checkpoint,
)
from compgen.training.predictor_defaults import sized_preset, too_long, warn_cut

CHECKPOINT_KIND = "seq2seq"
CONFIG_DIR = Path(__file__).parents[1] / "configs"
# the reference's augmentation probability per data set (other data: concatenation)
REFERENCE_P_AUG = {"scan/jump": 0.01, "scan/around_right": 0.2,
                   **{f"geoquery/{name}": 0.3 for name in geoquery.NAMES}}  # GECA's aug_ratio

Pair = tuple[list[str], list[str]]
# [train] settings a resumed run may change: the length of the run, and how the same loss
# is computed
RESUMABLE_CHANGES = ("epochs", "packed_decoder")


# ------------------------------------------------------------------ presets

def preset_document(preset: str | Path | dict) -> tuple[dict, str]:
    """A preset name (``seq2seq_scan``), a TOML path, or an already parsed dict -> (the
    parsed preset ``{"kind", "model", "train"}``, where it came from)."""
    if isinstance(preset, dict):
        return preset, "<preset>"
    path = Path(preset)
    if not path.is_file():
        path = CONFIG_DIR / f"{preset}.toml"
    if not path.is_file():
        names = sorted(p.stem for p in CONFIG_DIR.glob("seq2seq*.toml"))
        raise SettingError(f"`config`: no preset or file '{preset}' (presets: {', '.join(names)})")
    try:
        return tomllib.loads(read_text(path)), str(path)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None


def load_preset(preset: str | Path | dict, overrides: dict | None = None
                ) -> tuple[dict, PredictorTrainConfig]:
    """A preset (``preset_document``) with ``overrides`` (``{"model.max_len": 120}``) ->
    (model options, PredictorTrainConfig)."""
    doc, source = preset_document(preset)
    if overrides is not None and not isinstance(overrides, dict):
        raise SettingError(f"`overrides` must be a dict of 'section.key' -> value, not {overrides!r}")
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    if overrides:
        unknown = sorted(k for k in overrides if k.partition(".")[0] not in ("model", "train"))
        if unknown:
            raise SettingError(f"`overrides`: {', '.join(unknown)}: not model.* or train.* settings")
        doc, source = apply_overrides(doc, overrides), f"{source} with overrides"
    if doc.get("kind", CHECKPOINT_KIND) != CHECKPOINT_KIND:
        raise UserError(f"{source}: a '{doc.get('kind')}' preset, not a seq2seq one")
    check_preset({"kind": CHECKPOINT_KIND, **doc}, source)
    model = dict(doc.get("model", {}))
    for name in ("hidden", "embed", "max_len"):
        if name in model and model[name] < 1:
            raise UserError(f"{source} [model]: option '{name}' must be >= 1, not {model[name]}")
    if not 0 <= model.get("pdrop", 0) < 1:
        raise UserError(f"{source} [model]: option 'pdrop' must be in [0, 1), not {model['pdrop']}")
    return model, PredictorTrainConfig.from_dict(dict(doc.get("train", {})), f"{source} [train]")


# ------------------------------------------------------------------ data

def is_morphology(table: pl.DataFrame) -> bool:
    return "tags" in table.columns


def conditional_pairs(table: pl.DataFrame) -> list[Pair]:
    """(source, target) pairs the predictor learns. Morphology tables are in
    reinflection order (x = lemma chars + tags, y = form chars): the predictor reads the
    analysis direction, so the pair is turned around."""
    xs, ys = table["x"].to_list(), table["y"].to_list()
    return list(zip(ys, xs)) if is_morphology(table) else list(zip(xs, ys))


def split_train_dev(table: pl.DataFrame, dev_fraction: float, seed: int,
                    own_dev: bool = False) -> tuple[list[Pair], list[Pair]]:
    """Deduplicated training pairs and a dev set: ``val_hard`` for the morphology
    few-shot splits; the data's own ``dev`` split where ``own_dev`` (a user's file or
    folder that has one); else a shuffled ``dev_fraction`` of train (the reference drops
    the one element the two floors leave over)."""
    splits = set(table["split"].unique().to_list())
    if "train" not in splits:
        raise UserError(f"the data has no 'train' split (have: {', '.join(sorted(splits))})")
    train = unique_pairs(conditional_pairs(table.filter(pl.col("split") == "train")))
    if is_morphology(table) and "val_hard" in splits:
        return train, unique_pairs(conditional_pairs(table.filter(pl.col("split") == "val_hard")))
    if own_dev and "dev" in splits:
        return train, unique_pairs(conditional_pairs(table.filter(pl.col("split") == "dev")))
    # a signed 64-bit seed as numpy's unsigned one (the same bits; -1 is refused there)
    order = np.random.default_rng(seed % 2**64).permutation(len(train))
    n_train = math.floor((1 - dev_fraction) * len(train))
    n_dev = math.floor(dev_fraction * len(train))
    return [train[i] for i in order[:n_train]], [train[i] for i in order[n_train:n_train + n_dev]]


def read_augmented(augment: str | Path | Dataset, morphology: bool, fields: Fields) -> list[Pair]:
    """The augmented pairs of ``augment``: a file in any format a data file comes in, read
    with the data's ``fields`` where it has them (``read_pairs_file``), or rows already
    read (a ``Dataset``: every row, whatever its split)."""
    if isinstance(augment, Dataset):
        pairs = list(zip(augment.table["x"].to_list(), augment.table["y"].to_list()))
    else:
        pairs = read_pairs_file(augment, "`augment`", fields)
    if morphology:
        pairs = [(y, x) for x, y in pairs]
    return unique_pairs(pairs)


class MixedStream:
    """Endless training examples: from the augmented list with probability ``p_aug``,
    else from the original list; each list shuffled once and cycled. With ``p_aug = 0``
    the lists are concatenated first. Its position is a small state (two counters and
    the generator state) so a resumed run continues the same stream."""

    def __init__(self, original: list[Pair], augmented: list[Pair], p_aug: float, seed: int):
        self.p_aug = p_aug if augmented else 0.0
        if self.p_aug == 0:
            original, augmented = original + augmented, []
        self.rng = np.random.default_rng([seed % 2**64, 1])  # independent of the dev split's draw
        self.lists = [[original[i] for i in self.rng.permutation(len(original))],
                      [augmented[i] for i in self.rng.permutation(len(augmented))]]
        self.pos = [0, 0]

    def batches_per_epoch(self, n_train: int, batch_size: int, fixed: int = 0) -> int:
        if fixed > 0:
            return fixed
        if self.p_aug > 0:
            return max(1, math.floor(n_train / (1 - self.p_aug) / batch_size))
        return math.ceil(len(self.lists[0]) / batch_size)

    def take(self, n: int) -> list[Pair]:
        source = (self.rng.random(n) < self.p_aug).astype(int) if self.p_aug > 0 else np.zeros(n, int)
        counts = [int((source == 0).sum()), int((source == 1).sum())]
        drawn = []
        for k in (0, 1):
            idx = (self.pos[k] + np.arange(counts[k])) % max(len(self.lists[k]), 1)
            drawn.append(iter([self.lists[k][i] for i in idx]))
            self.pos[k] += counts[k]
        return [next(drawn[k]) for k in source]

    def state(self) -> dict:
        return {"pos": list(self.pos), "rng": self.rng.bit_generator.state}

    def restore(self, state: dict) -> None:
        self.pos = list(state["pos"])
        self.rng.bit_generator.state = state["rng"]


# ------------------------------------------------------------------ checkpoints
# The project's checkpoint format (compgen/training/generator.py): one safetensors file, kind
# "seq2seq". config = {"model": ..., "train": ..., "run": data set, seed, label, p_aug,
# sizes}; train_state = the learning curve, plus while training the resume state.

def save_predictor(path: str | Path, model: Seq2Seq, vocab: Vocab, run: dict,
                   train: dict | None = None, optimizer: torch.optim.Optimizer | None = None,
                   train_state: dict | None = None, best: dict | None = None) -> None:
    model_cfg = {k: v for k, v in dataclasses.asdict(model.cfg).items() if k != "vocab_size"}
    config = {"kind": CHECKPOINT_KIND, "model": model_cfg, "train": train or {}, "run": run}
    save_checkpoint(path, model, config, vocab, CHECKPOINT_KIND, optimizer, best=best,
                    train_state=train_state or {})


def read_predictor(path: str | Path):
    """The raw checkpoint (``compgen.training.checkpoint.Checkpoint``); other kinds are a UserError."""
    return load_checkpoint(path, kind=CHECKPOINT_KIND)


def load_predictor(path: str | Path) -> tuple[Seq2Seq, Vocab, dict]:
    """-> (model in eval mode, vocabulary, info): info = the run description (data,
    task, seed, label, p_aug, ...) plus ``curve`` and ``train_config``."""
    ckpt = read_predictor(path)
    try:
        cfg = Seq2SeqConfig.from_dict({**ckpt.config["model"], "vocab_size": len(ckpt.vocab)})
        model = Seq2Seq(cfg)
        model.load_state_dict(ckpt.weights)
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise UserError(f"{path}: damaged seq2seq checkpoint ({exc})") from None
    info = {**ckpt.config.get("run", {}), "curve": ckpt.train_state.get("curve", []),
            "train_config": ckpt.config.get("train", {})}
    return model.eval(), ckpt.vocab, info


# ------------------------------------------------------------------ training

def evaluate_pairs(model: Seq2Seq, vocab: Vocab, pairs: Sequence[Pair], morphology: bool,
                   batch_size: int = 256) -> dict:
    preds = predict(model, vocab, [x for x, _ in pairs], batch_size=batch_size)
    return score_predictions(preds, [y for _, y in pairs], morphology, model.cfg.max_len)


# the name rows given as a table (not a file) carry in a checkpoint: ``<table sha256:...>``
TABLE_RECORD = "<table"


def _default_label(augment: str | Path | Dataset | None) -> str:
    if augment is None:
        return "baseline"
    return "augmented" if isinstance(augment, Dataset) else Path(augment).stem


def augment_record(augment: str | Path | Dataset | None) -> str | None:
    """How a checkpoint names its augmented rows: a file by its path, rows given as a table
    by the name their ``Dataset`` carries (the API's: their digest)."""
    if augment is None:
        return None
    return augment.name if isinstance(augment, Dataset) else str(augment)


def _check_resume(out: Path, saved, data: str, augment, p_aug, model_opts: dict,
                  tcfg: PredictorTrainConfig) -> None:
    """``resume`` continues the checkpoint's own run: name every setting this call changes."""
    old = saved.config.get("run", {})
    changed = [f"{option} {old.get(key)} -> {value}"
               for option, key, value in (("`data`", "data", data),
                                          ("`augment`", "augment", augment_record(augment)),
                                          ("`p_aug`", "p_aug", p_aug))
               if old.get(key) != value]
    changed += [f"model.{k} {saved.config['model'].get(k)} -> {v}" for k, v in model_opts.items()
                if saved.config["model"].get(k) != v]
    trained = saved.config.get("train", {})
    changed += [f"train.{k} {trained.get(k)} -> {v}" for k, v in dataclasses.asdict(tcfg).items()
                if k not in RESUMABLE_CHANGES and k in trained and trained[k] != v]
    if changed:
        raise SettingError(f"{out}: `resume` continues the checkpoint's own run; this call asks for "
                           f"other settings ({'; '.join(changed)}); leave them out or write to "
                           "another -o")


def update(model: Seq2Seq, optimizer: torch.optim.Optimizer, vocab: Vocab, batch: list[Pair],
           tcfg: PredictorTrainConfig) -> float | None:
    """One optimizer step on ``batch``; returns its loss, or None for a skipped batch (a
    loss that is not finite or exactly 0)."""
    # cut before encoding: an augmented line can be huge, only max_len + 1 tokens count
    cut = model.cfg.max_len + 1
    source = collate([vocab.encode(x[:cut]) for x, _ in batch], model.cfg.max_len)
    target = collate([vocab.encode(y[:cut]) for _, y in batch], model.cfg.max_len)
    device = next(model.parameters()).device
    if device.type != "cpu":   # the packed steps are CPU bookkeeping: CUDA runs the padded loss
        source, target = to_device((source, target), Device("cuda", device.index))
        loss = model.loss(source, target)
    else:
        loss = (packed_loss(model, source, target) if tcfg.packed_decoder
                else model.loss(source, target))
    if not torch.isfinite(loss) or loss.item() == 0.0:
        return None
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if tcfg.gradnorm > 0:
        torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.gradnorm, foreach=True)
    optimizer.step()
    return loss.item()


def improved(acc: float, f1: float, best_acc: float, best_f1: float, monitor: str) -> bool:
    """Whether a dev score beats the best so far (by more than 1e-4): exact match, or with
    ``monitor = "exact_match+f1"`` exact match and, when it is unchanged, token F1."""
    if acc - best_acc > 1e-4:
        return True
    return (monitor == "exact_match+f1" and abs(acc - best_acc) <= 1e-4
            and math.isfinite(f1) and f1 - best_f1 > 1e-4)


def fit(model: Seq2Seq, vocab: Vocab, train: list[Pair], dev: list[Pair],
        augmented: list[Pair], tcfg: PredictorTrainConfig, *, p_aug: float = 0.0, seed: int = 0,
        morphology: bool = False, save: Callable[..., None] | None = None,
        resume=None, log: Callable[[str], None] | None = None) -> list[dict]:
    """Train ``model`` in place; returns the learning curve (one dict per epoch).
    ``save(optimizer, train_state, best)`` is called after every epoch (``best``: the
    best-dev weights when ``restore_best``); ``resume`` = the checkpoint of such a save."""
    stream = MixedStream(train, augmented, p_aug, seed)
    n_batches = stream.batches_per_epoch(len(train), tcfg.batch_size, tcfg.batches_per_epoch)
    # the fused kernel: one pass over all parameters instead of a loop over tensors
    keep_torch_compiler_cache()  # before torch makes its cache folder in /tmp
    optimizer = torch.optim.Adam(model.parameters(), lr=tcfg.lr, fused=True)
    curve, start, best_acc, patience, lr = [], 0, 0.0, tcfg.patience, tcfg.lr
    best_f1, best_epoch = 0.0, 0
    best_weights: dict | None = None
    if resume is not None:
        try:
            s = resume.train_state["state"]
            curve, start, best_acc, patience, lr = (resume.train_state["curve"], s["epoch"],
                                                    s["best_acc"], s["patience"], s["lr"])
            best_f1, best_epoch = s.get("best_f1", 0.0), s.get("best_epoch", 0)
            stream.restore(s["stream"])
            optimizer.load_state_dict(resume.optim)
            for group in optimizer.param_groups:  # a checkpoint's groups name their kernel
                group.update(fused=True, foreach=None)
            torch.set_rng_state(resume.rng)
            best_weights = dict(resume.best) or None
        except (KeyError, TypeError, ValueError, RuntimeError, IndexError) as exc:
            raise UserError(f"{resume.path}: damaged training state, cannot resume ({exc!r})") from None
    for epoch in range(start + 1, tcfg.epochs + 1):
        for group in optimizer.param_groups:
            group["lr"] = lr
        model.train()
        tic, total, counted = time.perf_counter(), 0.0, 0
        # progress inside an epoch: a line every tenth of it (an epoch can take minutes)
        every = max(1, n_batches // 10) if n_batches >= 20 else 0
        for i in range(n_batches):
            if log and every and i and i % every == 0:
                log(f"epoch {epoch}/{tcfg.epochs}  batch {i}/{n_batches}  loss "
                    f"{total / max(counted, 1):.4f}  {time.perf_counter() - tic:.1f}s")
            loss = update(model, optimizer, vocab, stream.take(tcfg.batch_size), tcfg)
            if loss is not None:
                total, counted = total + loss, counted + 1
        if tcfg.gamma > 0 and epoch == tcfg.epochs // 2:
            lr *= tcfg.gamma
        model.eval()
        scores = evaluate_pairs(model, vocab, dev, morphology, tcfg.eval_batch_size) if dev else {}
        acc = scores.get("exact_match", float("nan"))
        if dev and improved(acc, scores.get("f1", math.nan), best_acc, best_f1, tcfg.monitor):
            best_acc, best_f1, patience = acc, scores.get("f1", math.nan), tcfg.patience
            best_epoch = epoch
            if tcfg.restore_best:
                best_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
        elif dev and tcfg.patience > 0:
            patience -= 1
            if patience == 0:
                lr *= tcfg.lrdecay
                patience = tcfg.patience
        row = {"epoch": epoch, "train_loss": total / max(counted, 1), "dev_exact_match": acc,
               "dev_f1": scores.get("f1", float("nan")), "lr": lr,
               "seconds": round(time.perf_counter() - tic, 2)}
        curve.append(row)
        if log:
            log(f"epoch {epoch}/{tcfg.epochs}  loss {row['train_loss']:.4f}  dev exact match "
                f"{acc:.4f}  f1 {row['dev_f1']:.4f}  lr {lr:.2e}  {row['seconds']:.1f}s")
        if save:
            state = {"epoch": epoch, "best_acc": best_acc, "best_f1": best_f1,
                     "best_epoch": best_epoch,
                     "patience": patience, "lr": lr,
                     "stream": stream.state()}
            save(optimizer, {"state": state, "curve": curve}, best_weights)
    if tcfg.restore_best and best_weights is not None:
        model.load_state_dict(best_weights)
        if log:
            log(f"restored the best dev epoch's weights (epoch {best_epoch}, dev exact match "
                f"{best_acc:.4f})")
    return curve


def epoch_checkpoint(out: str | Path, epoch: int) -> Path:
    """Where ``keep_every`` keeps epoch ``epoch``'s checkpoint of a run writing ``out``:
    ``predictor.pt`` -> ``predictor-ep30.pt``. To go back to it, copy it to ``out`` and
    resume."""
    out = Path(out)
    return out.with_name(f"{out.stem}-ep{epoch}{out.suffix}")


def write_curve_csv(curve: list[dict], path: str | Path) -> None:
    text = pl.DataFrame(curve).write_csv()
    with atomic_open(path, "w", encoding="utf-8") as f:
        f.write(text)


def train_predictor(data: Dataset | str | None, preset: str | Path | dict | None,
                    out: str | Path, *,
                    augment: str | Path | Dataset | None = None, p_aug: float | None = None,
                    seed: int = 0, data_dir=None, epochs: int | None = None,
                    resume: bool = False, label: str | None = None, keep_every: int = 0,
                    log: Callable[[str], None] | None = None, device=None,
                    overrides: dict | None = None, fields: Fields | None = None) -> dict:
    """Train the predictor on ``data`` (a Dataset, or a name or path read here with
    ``fields`` once the settings are checked; None with ``resume``: the checkpoint's) (+ an
    augmented samples file, read with the data's fields, or rows already read: a Dataset) and write the checkpoint ``out`` and its learning curve ``<out>.curve.csv``, both after every epoch.
    ``keep_every`` N > 0 also keeps the checkpoint of every N-th epoch
    (``epoch_checkpoint``), resumable: a long run can go back to one when it diverges.
    ``device``: ``compgen.device.resolve_device``'s (default: $COMPGEN_DEVICE, else auto).
    Without ``preset`` a named set gets its paper's preset and own data one sized from the
    data (``predictor_defaults.sized_preset``); ``overrides`` replace preset values by
    ``section.key`` (``{"model.max_len": 120, "train.epochs": 40}``). Pairs longer than
    ``max_len`` are counted and named in a warning. Returns a summary."""
    device = resolve_device(device)
    if keep_every < 0:
        raise SettingError(f"`keep_every` must be >= 0, not {keep_every}")
    out = Path(out)
    saved = read_predictor(out) if resume and out.is_file() else None
    if saved is not None:   # a checkpoint describes its run: unset options come from it
        old = saved.config.get("run", {})
        data = data or old.get("data")
        augment = augment if augment is not None else old.get("augment")
        if isinstance(augment, str) and augment.startswith(TABLE_RECORD):
            raise SettingError(f"{out}: `resume`: this run's augmented rows were given as a "
                               f"table ({augment}); pass the same rows as `augment` again")
        p_aug = p_aug if p_aug is not None else old.get("p_aug")
    if not data:
        raise SettingError("`data` is required (unless `resume` continues an existing -o checkpoint)")
    dataset = data if isinstance(data, Dataset) else None   # else read once, below
    data = data.name if isinstance(data, Dataset) else str(data)
    refuse_overwriting_data(out, data, data_dir)
    if augment is not None and not isinstance(augment, Dataset):
        refuse_overwriting_inputs(out, [("augment", augment)], "`output`")
    # a name is read first only when the settings are sized from it: a bad preset fails fast
    if saved is not None and preset is None:
        model_opts = dict(saved.config["model"])
        tcfg = PredictorTrainConfig.from_dict(saved.config.get("train", {}))
    else:
        task = task_of(data)
        if preset is None and task.named:
            preset = task.default_preset("predictor")
        elif preset is None:
            dataset = open_dataset(dataset or data, data_dir, fields)
            preset = sized_preset(dataset.table)
        model_opts, tcfg = load_preset(preset, overrides)
    if saved is not None:
        _check_resume(out, saved, data, augment, p_aug, model_opts, tcfg)
    if epochs is not None:
        if epochs < 1:
            raise SettingError("`epochs` must be >= 1")
        tcfg = dataclasses.replace(tcfg, epochs=epochs)
    if p_aug is None:
        p_aug = REFERENCE_P_AUG.get(data, 0.0) if augment else 0.0
    if not 0.0 <= p_aug < 1.0:
        raise SettingError(f"`p_aug` must be in [0, 1), not {p_aug}")
    dataset = open_dataset(dataset or data, data_dir, fields)
    table = dataset.table
    morphology = is_morphology(table)
    # a user's data set with a dev split keeps it; the papers' sets keep their recipes
    train, dev = split_train_dev(table, tcfg.dev_fraction, seed, own_dev=keeps_own_dev(str(data)))
    augmented = read_augmented(augment, morphology, dataset.fields) if augment else []
    limit = int(model_opts.get("max_len", Seq2SeqConfig.max_len))
    warn_cut(log, "training pairs", too_long(train, limit), len(train), limit)
    warn_cut(log, "dev pairs", too_long(dev, limit), len(dev), limit)
    n_long = too_long(augmented, limit)
    if tcfg.drop_long_augmented:
        augmented = [(x, y) for x, y in augmented if len(x) <= limit and len(y) <= limit]
    warn_cut(log, "augmented pairs", n_long, len(augmented) + n_long * tcfg.drop_long_augmented,
             limit, "left out" if tcfg.drop_long_augmented else "cut")
    # the vocabulary of all original data (the reference: SCAN train = all SCAN tokens;
    # morphology: all items of the split); tokens only in augmented data become <unk>
    vocab = Vocab.build([t for x, y in conditional_pairs(table) for t in (x, y)])

    run = {"data": data, "data_source": source_record(data, data_dir, dataset.fields), "task": "morphology" if morphology else "scan", "seed": seed,
           "augment": augment_record(augment), "p_aug": p_aug,
           "n_train": len(train), "n_dev": len(dev), "n_augmented": len(augmented),
           "n_augmented_too_long": n_long,
           "label": label or _default_label(augment)}
    train_cfg = dataclasses.asdict(tcfg)
    torch.manual_seed(seed)
    model = Seq2Seq(Seq2SeqConfig.from_dict({**model_opts, "vocab_size": len(vocab)}))
    resume_from = None
    if resume and out.is_file():
        model, old_vocab, old_run = load_predictor(out)
        resume_from = read_predictor(out)
        if (old_vocab != vocab or old_run.get("data") != data
                or "state" not in resume_from.train_state):
            raise UserError(f"{out}: cannot resume (different data, or a finished run)")
    model.to(device.torch)

    curve_path = out.with_name(out.name + ".curve.csv")

    def save(optimizer: torch.optim.Optimizer, train_state: dict, best: dict | None = None) -> None:
        write_curve_csv(train_state["curve"], curve_path)
        save_predictor(out, model, vocab, run, train_cfg, optimizer, train_state, best)
        epoch = train_state["state"]["epoch"]
        if keep_every and epoch % keep_every == 0:
            save_predictor(epoch_checkpoint(out, epoch), model, vocab, run, train_cfg, optimizer,
                           train_state, best)

    tic = time.perf_counter()
    curve = fit(model, vocab, train, dev, augmented, tcfg, p_aug=p_aug, seed=seed,
                morphology=morphology, save=save, resume=resume_from, log=log)
    save_predictor(out, model, vocab, run, train_cfg, None, {"curve": curve})
    write_curve_csv(curve, curve_path)
    return {"checkpoint": str(out), "curve": str(curve_path), "epochs": len(curve),
            "n_train": len(train), "n_dev": len(dev), "n_augmented": len(augmented),
            "p_aug": p_aug, "dev_exact_match": curve[-1]["dev_exact_match"] if curve else None,
            "seconds": round(time.perf_counter() - tic, 1), "device": str(device)}
