"""Training, decoding and scoring of the character Transformer inflection model.

Regime of Samir & Silfverberg 2023 (their fairseq settings): Adam (0.9, 0.999), eps 1e-8,
no weight decay, no clipping; inverse-sqrt schedule warming up linearly from 1e-7 to
1e-3 over 4000 updates; label-smoothed cross-entropy (0.2); 6000 updates of 16
sentences; the weights with the best validation loss are kept. Validation runs after
an epoch (fairseq's default) unless ``validate_every`` sets an update interval; with
100-row training sets an epoch is 7 updates while a 1,000-row dev pass costs about 20,
so epoch-end validation is skipped until ``min_validation_interval`` updates have passed,
which keeps it under a tenth of training time.

The checkpoint is one safetensors file of kind ``inflection`` (see compgen.training.checkpoint): the
model config, the train config, and the target vocabulary in ``config``; the source
vocabulary in ``vocab``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from compgen.data.vocab import SPECIALS, Vocab
from compgen.device import CPU, Device, resolve_device, to_device
from compgen.errors import SettingError, UserError
from compgen.io import keep_torch_compiler_cache
from compgen.models.inflection import (
    EOS_ID,
    PAD_ID,
    CharVocab,
    InflectionConfig,
    InflectionTransformer,
    beam_search,
    pad_batch,
    reference_nll,
    source_tokens,
)
from compgen.models.inflection import SPECIALS as MODEL_SPECIALS
from compgen.training.checkpoint import load_checkpoint, save_checkpoint
from compgen.training.inflection_config import InflectionTrainConfig

Triple = tuple[str, str, str]
KIND = "inflection"


@dataclass
class InflectionModel:
    """A trained model with its vocabularies: what decoding and scoring need."""
    net: InflectionTransformer
    src_vocab: CharVocab
    tgt_vocab: CharVocab
    config: dict

    def encode_sources(self, triples: Sequence[Triple]) -> list[list[int]]:
        return [self.src_vocab.encode(source_tokens(lemma, tags)) for lemma, _, tags in triples]

    def encode_targets(self, triples: Sequence[Triple]) -> list[list[int]]:
        return [self.tgt_vocab.encode(list(form)) for _, form, _ in triples]


def min_validation_interval(dev_rows: int, batch_size: int) -> int:
    """Updates between epoch-end validations so that they cost <= ~10 % of training: a
    dev forward pass over ``dev_rows`` costs about dev_rows / 3 training rows (no backward)."""
    return math.ceil(10 * dev_rows / (3 * batch_size))


def learning_rate(step: int, cfg: InflectionTrainConfig) -> float:
    """fairseq inverse_sqrt: linear warm-up, then lr * sqrt(warmup / step)."""
    if step < cfg.warmup:
        return cfg.warmup_init_lr + step * (cfg.lr - cfg.warmup_init_lr) / cfg.warmup
    return cfg.lr * math.sqrt(cfg.warmup / step)


def _loss(net, src, tgt, smoothing: float, reduction: str = "sum") -> tuple[torch.Tensor, int]:
    tgt_in = pad_batch(tgt, bos=True)
    tgt_out = pad_batch(tgt, eos=True)
    device = net.positions.device
    if device.type != "cpu":
        src, tgt_in, tgt_out = to_device((src, tgt_in, tgt_out), Device("cuda", device.index))
    logits = net(src, tgt_in)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tgt_out.reshape(-1),
                           ignore_index=PAD_ID, label_smoothing=smoothing, reduction=reduction)
    return loss, int(tgt_out.ne(PAD_ID).sum())


@torch.no_grad()
def dev_loss(net, src: list[list[int]], tgt: list[list[int]], smoothing: float,
             batch: int = 250) -> float:
    """Label-smoothed loss per target token (the criterion fairseq validates on)."""
    net.eval()
    total, tokens = 0.0, 0
    for i in range(0, len(src), batch):
        loss, n = _loss(net, pad_batch(src[i:i + batch]), tgt[i:i + batch], smoothing)
        total += float(loss)
        tokens += n
    return total / max(tokens, 1)


def train_inflection(train: Sequence[Triple], dev: Sequence[Triple], out: str | Path,
                     cfg: InflectionTrainConfig | None = None,
                     log: Callable[[str], None] | None = None, lang: str | None = None,
                     device: Device | None = None) -> dict:
    """Train on ``train`` on ``device`` (default: $COMPGEN_DEVICE, else auto), keep the best-dev-loss weights,
    write the checkpoint ``out`` (``lang`` is recorded, for the export's validation set);
    ``cfg`` None: the STEM-CORRUPT preset's training."""
    cfg = cfg or InflectionTrainConfig()
    cfg.validate()
    device = resolve_device(device)
    if not train:
        raise UserError("no training triples")
    if not dev:
        raise UserError("no validation triples")
    torch.manual_seed(cfg.seed)
    src_vocab = CharVocab.build(source_tokens(lemma, tags) for lemma, _, tags in train)
    tgt_vocab = CharVocab.build(list(form) for _, form, _ in train)
    net = InflectionTransformer(cfg.model, len(src_vocab), len(tgt_vocab)).to(device.torch)
    model = InflectionModel(net, src_vocab, tgt_vocab, {})
    src, tgt = model.encode_sources(train), model.encode_targets(train)
    dev_src, dev_tgt = model.encode_sources(dev), model.encode_targets(dev)
    too_long = max(len(s) for s in src + dev_src + tgt + dev_tgt) + 2
    if too_long > cfg.model.max_positions:
        raise UserError(f"a sequence of {too_long} tokens exceeds max_positions {cfg.model.max_positions}")
    keep_torch_compiler_cache()  # before torch makes its cache folder in /tmp
    opt = torch.optim.Adam(net.parameters(), lr=cfg.warmup_init_lr, betas=(0.9, 0.999), eps=1e-8)
    gen = torch.Generator().manual_seed(cfg.seed)
    best, best_state, best_step, curve = math.inf, None, 0, []
    step, epoch, start = 0, 0, time.perf_counter()
    epoch_interval, validated_at = min_validation_interval(len(dev), cfg.batch_size), 0
    while step < cfg.updates:
        epoch += 1
        order = torch.randperm(len(src), generator=gen).tolist()
        for b in range(0, len(order), cfg.batch_size):
            net.train()
            idx = order[b:b + cfg.batch_size]
            loss, ntok = _loss(net, pad_batch([src[i] for i in idx]), [tgt[i] for i in idx],
                               cfg.label_smoothing)
            opt.zero_grad(set_to_none=True)
            (loss / ntok).backward()
            step += 1
            for group in opt.param_groups:
                group["lr"] = learning_rate(step, cfg)
            opt.step()
            last = step >= cfg.updates
            if (cfg.validate_every and step % cfg.validate_every == 0) or last:
                best, best_state, best_step = _validate(net, dev_src, dev_tgt, cfg, step, best,
                                                        best_state, best_step, curve)
            if last:
                break
        if not cfg.validate_every and step < cfg.updates and step - validated_at >= epoch_interval:
            validated_at = step
            best, best_state, best_step = _validate(net, dev_src, dev_tgt, cfg, step, best,
                                                    best_state, best_step, curve)
        if log and epoch % 50 == 0:
            log(f"epoch {epoch} update {step}: best dev loss {best:.4f} at {best_step}")
    net.load_state_dict(best_state)
    seconds = time.perf_counter() - start
    state = {"updates": step, "epochs": epoch, "best_dev_loss": best, "best_update": best_step,
             "seconds": seconds, "curve": curve[-200:], "device": str(device)}
    config = {"model": cfg.model.to_dict(), "train": {k: v for k, v in asdict(cfg).items() if k != "model"},
              "target_vocab": tgt_vocab.tokens, "train_rows": len(train), "lang": lang}
    save_checkpoint(out, net, config, Vocab(_as_vocab_tokens(src_vocab.tokens)), KIND, train_state=state)
    return state


def _as_vocab_tokens(tokens: list[str]) -> list[str]:
    # compgen.data.vocab.Vocab wants its own six specials first (ours are its first four)
    return list(SPECIALS) + tokens[len(MODEL_SPECIALS):]


def _validate(net, dev_src, dev_tgt, cfg, step, best, best_state, best_step, curve):
    loss = dev_loss(net, dev_src, dev_tgt, cfg.label_smoothing)
    curve.append((step, loss))
    if loss < best:
        return loss, {k: v.detach().clone() for k, v in net.state_dict().items()}, step
    return best, best_state, best_step


def load_inflection(path: str | Path, device: Device | None = None) -> InflectionModel:
    ckpt = load_checkpoint(path, kind=KIND)
    src_vocab = CharVocab(list(MODEL_SPECIALS) + ckpt.vocab.tokens[len(SPECIALS):])
    tgt_vocab = CharVocab(ckpt.config["target_vocab"])
    net = InflectionTransformer(InflectionConfig(**ckpt.config["model"]), len(src_vocab), len(tgt_vocab))
    net.load_state_dict(ckpt.weights)
    net.eval().to((device or CPU).torch)
    return InflectionModel(net, src_vocab, tgt_vocab, ckpt.config)


def _batches(n: int, size: int):
    for i in range(0, n, size):
        yield slice(i, min(n, i + size))


def predict(model: InflectionModel, triples: Sequence[Triple], beam: int = 5,
            batch: int = 100, search: Callable | None = None) -> tuple[list[str], list[float]]:
    """Beam-``beam`` forms and their scores (mean log-probability per token incl. EOS);
    ``search(source, beam, max_len)`` replaces the eager beam search (an export's)."""
    if search is None:
        def search(source, beam, max_len):
            return beam_search(model.net, source, beam=beam, max_len=max_len)
    # decode each distinct source once (the lemma-split set repeats rows), shortest first
    src = model.encode_sources(triples)
    distinct = sorted({tuple(s) for s in src}, key=lambda s: (len(s), s))
    found: dict[tuple, tuple[str, float]] = {}
    for part in _batches(len(distinct), batch):
        chunk = distinct[part]
        ids, sc = search(pad_batch(chunk), beam, max(len(s) for s in chunk) * 2 + 10)
        for s, hyp, score in zip(chunk, ids, sc, strict=True):
            found[s] = ("".join(model.tgt_vocab.decode(h for h in hyp if h != EOS_ID)), score)
    return [found[tuple(s)][0] for s in src], [found[tuple(s)][1] for s in src]


def uncertainty(model: InflectionModel, triples: Sequence[Triple], mode: str = "hypothesis",
                beam: int = 5, batch: int = 100) -> list[float]:
    """Per-row uncertainty ("nll"): ``hypothesis`` = minus the base-2 score of the beam's
    best output (the reference code); ``reference`` = teacher-forced mean NLL per target
    token of the given form (the paper's description; natural log)."""
    if mode == "hypothesis":
        _, scores = predict(model, triples, beam=beam, batch=batch)
        return [-s / math.log(2) for s in scores]
    if mode != "reference":
        raise SettingError(f"unknown `uncertainty` mode '{mode}' (valid: hypothesis, reference)")
    src, tgt = model.encode_sources(triples), model.encode_targets(triples)
    out: list[float] = []
    for part in _batches(len(src), 250):
        out.extend(reference_nll(model.net, pad_batch(src[part]), tgt[part]))
    return out


def exact_match(predicted: Sequence[str], gold: Sequence[str]) -> float:
    if len(predicted) != len(gold):
        raise ValueError("prediction and gold lists differ in length")
    return sum(p == g for p, g in zip(predicted, gold, strict=True)) / max(len(gold), 1)
