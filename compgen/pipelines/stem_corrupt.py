"""The STEM-CORRUPT experiment of Samir & Silfverberg 2023, one language per run name
(``stem-corrupt-<lang>``): pool -> initial model M on the 100 gold triples (also the
no-augmentation baseline) -> uncertainty of every pool row under M -> selection per
(strategy, size) -> a model trained from scratch on gold + selection -> exact match on
the lemma-split test set. Per seed, M is retrained (so loss-based selections differ by
seed); the pool is generated once (seed ``pool_seed``).

Layout under ``root/stem-corrupt-<lang>/``: ``pool.tsv``; ``seed<S>/M.pt``,
``seed<S>/nll-<mode>.txt``, ``seed<S>/<strategy>-<k>.tsv`` (the selection),
``seed<S>/<strategy>-<k>.pt`` and ``seed<S>/<strategy>-<k>.json`` (the result with the
per-row correctness, for paired bootstrap). A step whose output exists is skipped, so
an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import torch

from compgen.augment.selection import LOSS_STRATEGIES, check_strategy, select
from compgen.augment.stem_corrupt.corrupt import (
    StemCorruptConfig,
    language_file,
    read_triples,
    stem_corrupt_pool,
    write_triples,
)
from compgen.configs.stem_corrupt_run import StemCorruptRunConfig
from compgen.data.lemma_split import lemma_split_test
from compgen.data.sources import resolve_data_dir
from compgen.device import resolve_device
from compgen.errors import SettingError, UserError, read_text
from compgen.io import atomic_open
from compgen.models.inflection import InflectionConfig
from compgen.pipelines.stem_corrupt_report import accuracy_figure, markdown, tag_figure
from compgen.runtimes.onnx_inflection import (
    load_exported_inflection,
    onnx_beam_search,
)
from compgen.system.cache import digest
from compgen.training.inflection import (
    InflectionModel,
    load_inflection,
    predict,
    train_inflection,
    uncertainty,
)
from compgen.training.inflection_config import InflectionTrainConfig
from compgen.training.stem_corrupt_preset import StemCorruptPreset, stem_corrupt_preset

Triple = tuple[str, str, str]
BASELINE = "none"   # strategy name of the gold-only model


@dataclass
class StemCorruptRunOptions(StemCorruptRunConfig):
    """The preset's ``[run]`` (strategies, sizes, uncertainty, beam), the pool and the
    training it uses (defaults: the preset's ``[corrupt]``, ``[train]`` and ``[model]``),
    and where it reads and writes. ``corrupt`` and ``train`` hold the rest of those
    sections (theta, the aligner; batch size, learning rate, ...): the fields above win
    over their pool size, seed, updates, warm-up, validation and model."""
    root: Path = Path("runs/pipeline")
    pool_size: int = StemCorruptConfig.pool_size
    pool_seed: int = StemCorruptConfig.seed
    updates: int = InflectionTrainConfig.updates
    warmup: int = InflectionTrainConfig.warmup
    validate_every: int = InflectionTrainConfig.validate_every
    model: InflectionConfig = field(default_factory=InflectionConfig)
    data_dir: Path | None = None
    log: Callable[[str], None] = field(default=lambda line: None)
    corrupt: StemCorruptConfig = field(default_factory=StemCorruptConfig)
    train: InflectionTrainConfig = field(default_factory=InflectionTrainConfig)

    @classmethod
    def from_preset(cls, preset: StemCorruptPreset, **given) -> StemCorruptRunOptions:
        """The options of ``preset`` (``stem_corrupt_preset``'s), ``given`` over them."""
        values = {**{f.name: getattr(preset.run, f.name) for f in dataclasses.fields(preset.run)},
                  "pool_size": preset.corrupt.pool_size, "pool_seed": preset.corrupt.seed,
                  "updates": preset.train.updates, "warmup": preset.train.warmup,
                  "validate_every": preset.train.validate_every, "model": preset.train.model,
                  "corrupt": preset.corrupt, "train": preset.train}
        return cls(**{**values, **given})


def gold_and_dev(lang: str, data_dir: Path | None = None) -> tuple[list[Triple], list[Triple]]:
    root = resolve_data_dir(data_dir)
    return (read_triples(language_file(lang, "train-low", root)),
            read_triples(language_file(lang, "dev", root)))


SCORES_HEADER = "# compgen uncertainty scores "


def scores_settings(rows: Sequence[Triple], scorer: Path | None, mode: str) -> dict:
    """What a pool's uncertainty scores depend on: the rows, the scorer's bytes, the mode."""
    pool = hashlib.sha256("".join(f"{a}\t{b}\t{t}\n" for a, b, t in rows).encode()).hexdigest()
    return {"uncertainty": mode, "scorer": digest(scorer) if scorer is not None else None,
            "pool": pool, "rows": len(rows)}


def _read_scores(cache: Path) -> tuple[dict | None, list[float]]:
    lines = read_text(cache).splitlines()
    settings = None
    if lines and lines[0].startswith(SCORES_HEADER):
        try:
            settings = json.loads(lines[0][len(SCORES_HEADER):])
        except ValueError:
            raise UserError(f"{cache}:1: damaged settings line") from None
        if not isinstance(settings, dict):
            raise UserError(f"{cache}:1: damaged settings line")
        lines = lines[1:]
    values = []
    for lineno, line in enumerate(lines, 2 if settings is not None else 1):
        try:
            values.append(float(line))
        except ValueError:
            raise UserError(f"{cache}:{lineno}: not a number: {line[:40]!r}") from None
    return settings, values


def pool_scores(rows: Sequence[Triple], scorer: Path | None, cache: Path | None,
                mode: str = StemCorruptRunConfig.uncertainty) -> list[float]:
    """Uncertainty of every pool row under ``scorer``; read from / written to ``cache``.

    The cache's first line records what the scores were computed from (the pool, the
    scorer's digest, the uncertainty mode): a file computed otherwise is recomputed when
    the scorer is given and refused when it is not. ``scorer`` must be an inflection
    checkpoint even when the cache is used."""
    model = load_inflection(scorer) if scorer is not None else None
    wanted = scores_settings(rows, scorer, mode)
    if cache is not None and cache.is_file():
        settings, values = _read_scores(cache)
        if settings is None:
            stale = "it does not record the settings it was computed with"
        else:
            differ = [key for key in ("uncertainty", "pool", "scorer")
                      if settings.get(key) != wanted[key] and (key != "scorer" or scorer)]
            stale = ", ".join(f"its {k} ({_short(settings.get(k))}) is not this run's "
                              f"({_short(wanted[k])})" for k in differ)
        if not stale:
            if len(values) != len(rows):
                raise UserError(f"{cache}: {len(values)} scores for a pool of {len(rows)} rows")
            return values
        if model is None:
            raise SettingError(f"`scores` {cache}: {stale}; give `scorer` to recompute it")
    if model is None:
        raise UserError("uncertainty scores need a scorer model")
    values = uncertainty(model, rows, mode)
    if cache is not None:
        with atomic_open(cache, "w") as f:
            f.write(SCORES_HEADER + json.dumps(wanted, sort_keys=True) + "\n")
            f.write("".join(f"{v:.6f}\n" for v in values))
    return values


def _short(value) -> str:
    text = str(value)
    return text[:12] if len(text) == 64 else text


def select_rows(rows: Sequence[Triple], strategy: str, size: int,
                nll: Sequence[float] | None, seed: int) -> list[Triple]:
    return [rows[i] for i in select(strategy, [t for _, _, t in rows], size, nll, seed)]


def test_rows(lang: str, test: str, data_dir: Path | None) -> list[Triple]:
    if test == "lemma-split":
        return lemma_split_test(lang, data_dir)
    if test == "test":
        return read_triples(language_file(lang, "test", resolve_data_dir(data_dir)))
    raise SettingError(f"unknown `test` '{test}' (valid: lemma-split, test)")


def evaluate_model(model: Path, lang: str, test: str = "lemma-split",
                   beam: int = StemCorruptRunConfig.beam,
                   data_dir: Path | None = None, predictions: Path | None = None,
                   device=None) -> dict:
    """Exact match of an inflection checkpoint or export folder on ``device`` (a
    ``compgen.device`` name or Device; default: ``--device``'s default, auto)."""
    device = resolve_device(device)
    rows = test_rows(lang, test, data_dir)
    start = time.perf_counter()
    if Path(model).is_dir():   # an export folder: decode with ONNX Runtime
        manifest, src_vocab, tgt_vocab = load_exported_inflection(model)
        forms, _ = predict(InflectionModel(None, src_vocab, tgt_vocab, manifest.config), rows,
                           beam=beam, search=partial(onnx_beam_search, Path(model), device=device))
    else:
        forms, _ = predict(load_inflection(model, device), rows, beam=beam)
    correct = [int(f == gold) for f, (_, gold, _) in zip(forms, rows, strict=True)]
    if predictions is not None:
        with atomic_open(predictions, "w", encoding="utf-8") as out:
            for (lemma, gold, tags), form in zip(rows, forms, strict=True):
                out.write(f"{lemma}\t{gold}\t{form}\t{tags}\n")
    return {"accuracy": sum(correct) / len(rows), "rows": len(rows), "correct": correct,
            "seconds": time.perf_counter() - start, "device": str(device)}


def _train(train: list[Triple], dev: list[Triple], out: Path, seed: int,
           opts: StemCorruptRunOptions, lang: str) -> dict:
    cfg = dataclasses.replace(opts.train, updates=opts.updates, warmup=opts.warmup,
                              validate_every=opts.validate_every, seed=seed, model=opts.model)
    cfg.validate()
    return train_inflection(train, dev, out, cfg, lang=lang)


def _result(lang: str, strategy: str, size: int, seed: int, model: Path, out: Path,
            opts: StemCorruptRunOptions, train_state: dict | None) -> dict:
    if out.is_file():
        return json.loads(out.read_text())
    res = evaluate_model(model, lang, "lemma-split", opts.beam, opts.data_dir)
    row = {"lang": lang, "strategy": strategy, "size": size, "seed": seed,
           "accuracy": res["accuracy"], "rows": res["rows"], "eval_seconds": res["seconds"],
           "updates": opts.updates, "train_seconds": (train_state or {}).get("seconds"),
           "correct": res["correct"]}
    with atomic_open(out, "w") as f:
        json.dump(row, f)
    return row


def run_language(lang: str, seeds: Sequence[int], opts: StemCorruptRunOptions) -> list[dict]:
    """Every (seed, strategy, size) of one language; returns the result rows."""
    strategies = [check_strategy(s) for s in opts.strategies]
    if any(k < 1 for k in opts.sizes):
        raise SettingError("`sizes` must be >= 1")
    if max(opts.sizes, default=0) > opts.pool_size:
        raise SettingError(f"`sizes` {max(opts.sizes)} is larger than the pool ({opts.pool_size})")
    gold, dev = gold_and_dev(lang, opts.data_dir)
    folder = Path(opts.root) / f"stem-corrupt-{lang}"
    pool_path = folder / "pool.tsv"
    if not pool_path.is_file():
        start = time.perf_counter()
        config = dataclasses.replace(opts.corrupt, pool_size=opts.pool_size, seed=opts.pool_seed)
        write_triples(pool_path, stem_corrupt_pool(gold, config))
        opts.log(f"{lang}: pool of {opts.pool_size:,} in {time.perf_counter() - start:.1f} s")
    pool = read_triples(pool_path)
    results = []
    for seed in seeds:
        sub = folder / f"seed{seed}"
        base = sub / "M.pt"
        state = None
        if not base.is_file():
            state = _train(gold, dev, base, seed, opts, lang)
            opts.log(f"{lang} seed {seed}: M trained in {state['seconds']:.0f} s")
        results.append(_result(lang, BASELINE, 0, seed, base, sub / "M.json", opts, state))
        opts.log(f"{lang} seed {seed}: no augmentation {results[-1]['accuracy']:.4f}")
        nll = None
        if any(s in LOSS_STRATEGIES for s in strategies):
            nll = pool_scores(pool, base, sub / f"nll-{opts.uncertainty}.txt", opts.uncertainty)
        for k in opts.sizes:
            for strategy in strategies:
                name = f"{strategy}-{k}"
                chosen_path = sub / f"{name}.tsv"
                if not chosen_path.is_file():
                    write_triples(chosen_path, select_rows(pool, strategy, k, nll, seed))
                model = sub / f"{name}.pt"
                state = None
                if not model.is_file():
                    state = _train(gold + read_triples(chosen_path), dev, model, seed, opts, lang)
                results.append(_result(lang, strategy, k, seed, model, sub / f"{name}.json", opts, state))
                opts.log(f"{lang} seed {seed}: {name} {results[-1]['accuracy']:.4f}")
    return results


def collect_results(root: Path) -> list[dict]:
    """Every result row written under ``root/stem-corrupt-*/seed*/``."""
    rows = []
    for path in sorted(Path(root).glob("stem-corrupt-*/seed*/*.json")):
        rows.append(json.loads(path.read_text()))
    return rows


def write_report(root: Path) -> dict[str, Path]:
    """``stem-corrupt-results.md`` and the two kinds of PNG from every result under root."""
    rows = collect_results(root)
    if not rows:
        raise UserError(f"{root}: no STEM-CORRUPT results yet")
    written = {"table": Path(root) / "stem-corrupt-results.md"}
    with atomic_open(written["table"], "w", encoding="utf-8") as f:
        f.write(markdown(rows))
    written["accuracy"] = accuracy_figure(rows, Path(root) / "stem-corrupt-accuracy.png")
    for folder in sorted(Path(root).glob("stem-corrupt-*/")):
        selections: dict[str, list[str]] = defaultdict(list)
        for path in folder.glob("seed*/*-*.tsv"):
            strategy = path.stem.rsplit("-", 1)[0]
            selections[strategy].extend(t for _, _, t in read_triples(path))
        if selections:
            out = Path(root) / f"{folder.name}-tags.png"
            written[folder.name] = tag_figure(dict(selections), out)
    return written


def pipeline_from_cli(name: str, seeds: Sequence[int], root: Path, strategies: str | None,
                      sizes: str | None, updates: int | None, threads: int | None,
                      data_dir: Path | None, log: Callable[[str], None],
                      uncertainty: str | None = None,
                      config: str | Path | None = None) -> dict[str, Path]:
    """``compgen pipeline stem-corrupt-LANG``: parse the options, run, write the report
    (an option left None is the STEM-CORRUPT preset's: the bundled one, or ``config``, a
    preset file read over it)."""
    lang = name.removeprefix("stem-corrupt-")
    given = {}
    if sizes is not None:
        try:
            given["sizes"] = tuple(int(s) for s in sizes.split(",") if s.strip())
        except ValueError:
            raise SettingError(f"`sizes` must be comma-separated integers (got {sizes!r})") from None
    if strategies is not None:
        given["strategies"] = tuple(check_strategy(s) for s in strategies.split(",") if s.strip())
    if uncertainty is not None:
        given["uncertainty"] = uncertainty
    if updates is not None and updates < 3:
        raise SettingError("`updates` must be >= 3")
    if threads is not None:
        if threads < 1:
            raise SettingError("`threads` must be >= 1")
        torch.set_num_threads(threads)
    opts = StemCorruptRunOptions.from_preset(stem_corrupt_preset(config), root=root,
                                             data_dir=data_dir, log=log, **given)
    if opts.uncertainty not in ("hypothesis", "reference"):
        raise SettingError(f"`uncertainty` must be hypothesis or reference (got {opts.uncertainty!r})")
    if updates is not None:   # keep the paper's warm-up share (4000 of 6000)
        opts.updates, opts.warmup = updates, max(1, updates * 2 // 3)
        opts.validate_every = max(1, updates // 8)
    gold_and_dev(lang, data_dir)   # an unknown language fails before any work
    run_language(lang, seeds, opts)
    written = write_report(root)
    for path in written.values():
        log(f"wrote {path}")
    return written
