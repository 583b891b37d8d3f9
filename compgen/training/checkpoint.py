"""Presets and the self-describing checkpoint format.

Presets are plain TOML files in ``compgen/configs`` with sections ``[model]``,
``[train]`` and ``[sample]`` plus a top-level ``kind``; CLI options override single keys.

A checkpoint is ONE safetensors file (any name, e.g. ``recomb2.pt``): tensors
``model.*`` (weights), ``optim.*`` (Adam moments), ``best.*`` (best-dev weights while
training), ``rng.torch``; string metadata ``format``, ``kind``, ``config`` (JSON),
``vocab`` (JSON), ``train_state`` (JSON: step, epoch, position, lr, best ppl, loss
curve). Loading never executes code. Files are written atomically, so an interrupted
run leaves the previous checkpoint intact.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import safetensors.torch
import torch
from safetensors import SafetensorError

from compgen.augment.csl.presets import SECTIONS as CSL_SECTIONS
from compgen.configs import GeneratorTrainConfig, PredictorTrainConfig, read_section
from compgen.data.task import task_of
from compgen.data.vocab import SPECIALS, Vocab
from compgen.decoding.options import RUN_ONLY, SampleOptions
from compgen.device import cpu_copy
from compgen.errors import UserError, not_a_file
from compgen.io import atomic_open, keep_torch_compiler_cache
from compgen.models.inflection import SPECIALS as MODEL_SPECIALS
from compgen.models.inflection import CharVocab, InflectionConfig, InflectionTransformer
from compgen.models.recombine import Recombine, RecombineConfig
from compgen.models.seq2seq import Seq2Seq, Seq2SeqConfig
from compgen.training.stem_corrupt_preset import SECTIONS as STEM_CORRUPT_SECTIONS

CONFIG_DIR = Path(__file__).parents[1] / "configs"
FORMAT = "compgen-checkpoint-1"


# ------------------------------------------------------------------ presets

def preset_names() -> list[str]:
    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))


def load_preset(name_or_path: str) -> dict:
    """A preset by name (``recombine_scan``) or a TOML file path, checked by
    :func:`check_preset`."""
    path = Path(name_or_path)
    source = str(path)  # a file: named as given
    if not path.is_file():
        path = CONFIG_DIR / f"{name_or_path}.toml"
        source = path.name
    if not path.is_file():
        raise UserError(f"unknown config '{name_or_path}' (presets: {', '.join(preset_names())})")
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None
    return check_preset(doc, source)


def preset_sections(kind: str) -> dict[str, type]:
    """Section name -> the dataclass that section is read into, for a preset ``kind``."""
    if kind == "recombine":
        return {"model": RecombineConfig, "train": GeneratorTrainConfig, "sample": SampleOptions}
    if kind == "seq2seq":
        return {"model": Seq2SeqConfig, "train": PredictorTrainConfig}
    if kind == "csl":   # compgen augment csl's presets
        return dict(CSL_SECTIONS)
    if kind == "stem-corrupt":
        return dict(STEM_CORRUPT_SECTIONS)
    raise UserError(f"preset kind '{kind}' unknown (valid: recombine, seq2seq)")


def check_preset(doc: dict, source: str) -> dict:
    """``doc`` as it is if every section and key is known and well typed; otherwise a
    UserError naming the first wrong key (with the valid ones)."""
    kind = doc.get("kind", "recombine")
    if not isinstance(kind, str):
        raise UserError(f"{source}: 'kind' must be a string, not {kind!r}")
    sections = preset_sections(kind)
    unknown = [str(k) for k in doc if k != "kind" and k not in sections]
    if unknown:
        raise UserError(f"{source}: unknown section(s) {', '.join(unknown)} (valid: kind, "
                        f"{', '.join(f'[{name}]' for name in sections)})")
    for name, cls in sections.items():
        # set by the program (vocab_size) or by each run (a sampling job's RUN_ONLY)
        skip = RUN_ONLY if cls is SampleOptions else ("vocab_size",)
        read_section(cls, doc.get(name, {}), f"{source} [{name}]", skip=skip)
    return doc


def apply_overrides(config: dict, overrides: dict) -> dict:
    """``{"model.nproto": 1}`` -> config with that key replaced (None values ignored)."""
    config = copy.deepcopy(config)
    for key, value in overrides.items():
        if value is None:
            continue
        section, _, name = key.partition(".")
        config.setdefault(section, {})[name] = value
    return config


def default_preset(kind: str, data: str) -> str:
    """The preset a command uses without --config: the CPU size of the data set's task
    (``recombine_sig_cpu`` for SIGMORPHON, ``recombine_scan_cpu`` for SCAN,
    ``recombine_generic_cpu`` for a generator on any other data; ``seq2seq_*`` for
    predictors, ``seq2seq_geo`` for GeoQuery)."""
    return task_of(data).default_preset(kind)


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
            tensors[f"optim.{idx}.{name}"] = cpu_copy(t)
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
    """Write a self-describing checkpoint atomically (generic: any model kind), from CPU
    copies of the tensors wherever they live (it loads on any machine)."""
    tensors = {f"model.{k}": cpu_copy(v) for k, v in model.state_dict().items()}
    groups: list = []
    if optimizer is not None:
        opt_tensors, groups = _flatten_optimizer(optimizer.state_dict())
        tensors.update(opt_tensors)
    for k, v in (best or {}).items():
        tensors[f"best.{k}"] = cpu_copy(v)
    tensors["rng.torch"] = torch.get_rng_state()
    metadata = {"format": FORMAT, "kind": kind, "config": json.dumps(config),
                "vocab": vocab.to_json(), "optim_groups": json.dumps(groups),
                "train_state": json.dumps(train_state or {})}
    blob = safetensors.torch.save(tensors, metadata=metadata)
    with atomic_open(path, "wb") as f:
        f.write(blob)


def load_checkpoint(path, kind: str | None = None) -> Checkpoint:
    """Read a checkpoint; ``kind`` (e.g. "recombine") rejects checkpoints of other kinds.

    Everything is checked before a model is built: the metadata (format, kind, JSON
    fields), and every stored weight against the shape the config implies (the model is
    laid out on the meta device first, which allocates nothing, so a config asking for a
    huge model is refused instead of allocated)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: {not_a_file(path, 'checkpoint')}")
    try:
        raw = path.read_bytes()
        header_len = int.from_bytes(raw[:8], "little")
        if header_len > len(raw) - 8:
            raise ValueError("header longer than the file")
        header = json.loads(raw[8:8 + header_len])
        metadata = header.get("__metadata__") or {}
        tensors = safetensors.torch.load(raw)
    except (SafetensorError, ValueError, UnicodeDecodeError, json.JSONDecodeError, MemoryError,
            AttributeError, RecursionError, OverflowError):
        raise UserError(f"{path}: not a compgen checkpoint (not a safetensors file)") from None
    stored_kind, config = _checked_metadata(metadata, path, kind)
    groups = _json_field(metadata, "optim_groups", list, path)
    train_state = _json_field(metadata, "train_state", dict, path)
    split: dict[str, dict] = {"model": {}, "optim": {}, "best": {}, "rng": {}}
    for key, value in tensors.items():
        head, _, rest = key.partition(".")
        if head not in split or not rest:
            raise UserError(f"{path}: damaged checkpoint (unexpected tensor {key!r})")
        split[head][rest] = value
    try:
        optim = _unflatten_optimizer(split["optim"], groups) if split["optim"] else {}
    except ValueError:
        raise UserError(f"{path}: damaged checkpoint (optimizer tensors)") from None
    ckpt = Checkpoint(
        kind=stored_kind, config=config, vocab=Vocab.from_json(metadata["vocab"], str(path)),
        weights=split["model"], optim=optim, best=split["best"], rng=split["rng"].get("torch"),
        train_state=train_state, path=str(path))
    check_weights(ckpt)
    check_finite(tensors, path)
    return ckpt


def check_finite(tensors: dict, path) -> None:
    """Refuse a checkpoint holding a NaN or infinite value in any stored tensor (weights,
    best-dev weights, optimizer moments): a diverged run's weights would be resumed,
    exported or sampled as if trained, and produce garbage."""
    for key, tensor in tensors.items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise UserError(f"{path}: tensor {key} holds NaN or infinite values; the checkpoint "
                            "is broken (a diverged training run?): train again or go back to "
                            "an earlier checkpoint")


KINDS = ("recombine", "seq2seq", "inflection")


def _checked_metadata(metadata, path: Path, kind: str | None) -> tuple[str, dict]:
    """(kind, config) of a checkpoint's metadata, checked as ``load_checkpoint`` says."""
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT:
        found = metadata.get("format") if isinstance(metadata, dict) else None
        raise UserError(f"{path}: not a compgen checkpoint (format {found!r})")
    stored_kind = metadata.get("kind")
    if stored_kind not in KINDS:
        raise UserError(f"{path}: unknown checkpoint kind {stored_kind!r} (valid: {', '.join(KINDS)})")
    if kind is not None and stored_kind != kind:
        raise UserError(f"{path}: a '{stored_kind}' checkpoint, expected '{kind}'")
    if "vocab" not in metadata:
        raise UserError(f"{path}: damaged checkpoint (metadata without 'vocab')")
    return stored_kind, _json_field(metadata, "config", dict, path, required=True)


def checkpoint_config(path, kind: str | None = None) -> dict:
    """The config of a checkpoint, read from its header alone (no weights), checked as
    ``load_checkpoint`` checks it."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: {not_a_file(path, 'checkpoint')}")
    try:
        with path.open("rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
            if header_len > path.stat().st_size - 8:
                raise ValueError("header longer than the file")
            header = json.loads(f.read(header_len))
        metadata = header.get("__metadata__") or {}
    except (ValueError, UnicodeDecodeError, json.JSONDecodeError, MemoryError,
            AttributeError, RecursionError, OverflowError):
        raise UserError(f"{path}: not a compgen checkpoint (not a safetensors file)") from None
    return _checked_metadata(metadata, path, kind)[1]


def _json_field(metadata: dict, name: str, kind: type, path: Path, required: bool = False):
    if name not in metadata:
        if required:
            raise UserError(f"{path}: damaged checkpoint (metadata without {name!r})")
        return kind()
    try:
        value = json.loads(metadata[name])
    except (ValueError, TypeError, RecursionError):
        raise UserError(f"{path}: damaged checkpoint (metadata {name!r} is not JSON)") from None
    if not isinstance(value, kind):
        raise UserError(f"{path}: damaged checkpoint (metadata {name!r} is not a "
                        f"{'JSON object' if kind is dict else 'JSON list'})")
    return value


def model_factory(ckpt: Checkpoint):
    """A zero-argument function building the checkpoint's model from its config."""
    config = ckpt.config
    model = config.get("model")
    if not isinstance(model, dict):
        raise UserError(f"{ckpt.path}: damaged checkpoint (config without a [model] table)")
    if ckpt.kind == "recombine":
        cfg = RecombineConfig.from_dict({**model, "vocab_size": len(ckpt.vocab)})
        check_model_values(cfg, ckpt.path)
        return lambda: Recombine(cfg)
    if ckpt.kind == "seq2seq":
        cfg = Seq2SeqConfig.from_dict({**model, "vocab_size": len(ckpt.vocab)})
        check_model_values(cfg, ckpt.path)
        return lambda: Seq2Seq(cfg)

    target = config.get("target_vocab")
    if not isinstance(target, list) or not all(isinstance(t, str) for t in target):
        raise UserError(f"{ckpt.path}: damaged checkpoint (config without 'target_vocab')")
    source = CharVocab(list(MODEL_SPECIALS) + ckpt.vocab.tokens[len(SPECIALS):])
    sizes = (len(source), len(CharVocab(target)))
    cfg = InflectionConfig(**model)
    check_model_values(cfg, ckpt.path)
    return lambda: InflectionTransformer(cfg, *sizes)


# sizes a model cannot have fewer than one of (lengths, widths, heads, layers)
POSITIVE_FIELDS = ("max_len", "hidden", "embed", "attdim", "embed_dim", "ffn_dim", "heads",
                   "encoder_layers", "decoder_layers", "max_positions")


def check_model_values(cfg, path) -> None:
    """Each field of a model config holds a value of its default's type and range: sizes
    >= 1, other integers >= 0, dropout rates in [0, 1), other floats finite; a UserError
    naming the checkpoint and the field otherwise."""
    for item in dataclasses.fields(cfg):
        value, default = getattr(cfg, item.name), item.default
        problem = None
        if isinstance(default, bool):
            problem = None if isinstance(value, bool) else "must be true or false"
        elif isinstance(default, int):
            low = 1 if item.name in POSITIVE_FIELDS else 0
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                problem = f"must be an integer >= {low}"
        elif isinstance(default, float):
            if isinstance(value, bool) or not isinstance(value, int | float) \
                    or not math.isfinite(value):
                problem = "must be a finite number"
            elif "drop" in item.name and not 0.0 <= value < 1.0:
                problem = "must be in [0, 1)"
        if problem:
            raise UserError(f"{path}: bad model config in the checkpoint: model.{item.name} = "
                            f"{value!r} ({problem})")


def check_weights(ckpt: Checkpoint) -> None:
    """Every weight the config's model has is stored with its shape, and nothing else."""
    # laying a model out on the meta device imports torch's compiler, which makes its
    # cache folder in the system temp dir and leaves it there
    keep_torch_compiler_cache()
    try:
        factory = model_factory(ckpt)
        with torch.device("meta"):
            skeleton = factory()
    except UserError:
        raise
    except (TypeError, ValueError, KeyError, RuntimeError, OverflowError, AttributeError) as exc:
        raise UserError(f"{ckpt.path}: bad model config in the checkpoint ({exc})") from None
    expected = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    stored = {k: tuple(v.shape) for k, v in ckpt.weights.items()}
    missing = sorted(set(expected) - set(stored))
    extra = sorted(set(stored) - set(expected))
    if missing or extra:
        what = f"missing weight {missing[0]!r}" if missing else f"unexpected weight {extra[0]!r}"
        raise UserError(f"{ckpt.path}: weights do not fit the model config ({what})")
    for name, shape in expected.items():
        if stored[name] != shape:
            raise UserError(f"{ckpt.path}: weights do not fit the model config ({name} is "
                            f"{list(stored[name])}, the config implies {list(shape)})")
    best = {k: tuple(v.shape) for k, v in ckpt.best.items()}
    if best and best != expected:
        raise UserError(f"{ckpt.path}: the best-dev weights do not fit the model config")


def build_recombine(config: dict, vocab_size: int):
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
