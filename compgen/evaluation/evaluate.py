"""Evaluating the conditional predictor on the evaluation sets, and the result tables
(the metrics are in :mod:`compgen.models.metrics`).

Evaluation sets: SCAN ``test`` (deduplicated). Morphology few-shot splits: FUT
(``test_hard``), PST (``val_hard``), their mean FUT+PST (the paper's hard column) and
OTHER (``test_easy``), each also restricted to NOVEL items (whose exact ``;``-joined tag
bundle never occurs in training). Over several checkpoints (seeds): mean and population
standard deviation (ddof 0), as the paper.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import torch

from compgen.data import load_dataset
from compgen.data.dataset import Dataset, open_dataset
from compgen.data.files import Fields, source_record
from compgen.data.vocab import EOS_ID
from compgen.errors import SettingError, UserError
from compgen.evaluation.plots import plot_attention, plot_generator_attention, plot_learning_curve
from compgen.io import atomic_open
from compgen.models.metrics import predict, score_predictions
from compgen.models.recombine import collate_prototypes, is_real
from compgen.models.seq2seq import collate, cut_prediction, greedy_search
from compgen.neighborhoods.omega_source import prototype_source
from compgen.runtimes.artifact import load_manifest
from compgen.runtimes.eager import greedy_with_weights
from compgen.runtimes.predictor import predict_exported
from compgen.training.checkpoint import load_generator
from compgen.training.predictor import is_morphology, load_predictor, write_curve_csv

MORPH_SETS = {"FUT": "test_hard", "PST": "val_hard", "OTHER": "test_easy"}


# ------------------------------------------------------------------ evaluation sets

def evaluation_table(data: Dataset | str, data_dir=None,
                     trained_on: str | None = None) -> pl.DataFrame:
    """The example table of a data set (a Dataset, or a name, file or folder read here),
    a data file given as the test set: all of its rows are the test set unless it has a
    split field. ``trained_on``: the model's own training data, whose file is never
    relabelled "test"."""
    dataset = open_dataset(data, data_dir)
    table = dataset.table
    if Path(dataset.name).is_file() and "test" not in table["split"].unique().to_list():
        if trained_on is not None:
            raise SettingError(f"{trained_on}: the model was trained on this file, which has "
                               "no test split; give `data` TEST_FILE (or train on a folder "
                               "holding train and test files)")
        table = table.with_columns(split=pl.lit("test"))
    return table


def recorded_data(meta: dict) -> str | None:
    """The data set a predictor was trained on: its name, or the absolute path recorded
    for a file or folder when the name as given no longer resolves from here."""
    data = meta.get("data")
    source = meta.get("data_source") or {}
    if data and source.get("path") and not Path(data).exists() and Path(source["path"]).exists():
        return source["path"]
    return data


def check_unchanged(checkpoint, meta: dict, data: str) -> None:
    """The recorded data file or folder still holds what the model was trained on (its
    sha256 as recorded): an edited or replaced one is an error, not another test set."""
    recorded = (meta.get("data_source") or {}).get("sha256")
    path = (meta.get("data_source") or {}).get("path")
    if not recorded or not path or Path(data).resolve() != Path(path):
        return
    now = source_record(data, None, Fields()).get("sha256")   # the files alone
    if now is not None and now != recorded:
        raise SettingError(f"{data}: changed since {checkpoint} was trained on it (sha256 "
                        f"{recorded[:12]}… then, {now[:12]}… now); give `data` to evaluate on "
                        "it as it is")


def evaluation_sets(table: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """name -> deduplicated table with ``source``, ``target`` (token lists) and ``novel``
    (bool; None for SCAN). See the module doc for the names."""
    splits = set(table["split"].unique().to_list())
    if not is_morphology(table):
        if "test" not in splits:
            raise UserError(f"the data has no 'test' split (have: {', '.join(sorted(splits))})")
        test = table.filter(pl.col("split") == "test")
        return {"test": test.select(source="x", target="y", novel=pl.lit(None, pl.Boolean))
                .unique(subset=["source", "target"], maintain_order=True)}
    if splits == {"test"}:   # a data file: its rows, analysis pairs, novelty unknown
        return {"test": table.select(source="y", target="x", novel=pl.lit(None, pl.Boolean))
                .unique(subset=["source", "target"], maintain_order=True)}
    missing = [s for s in MORPH_SETS.values() if s not in splits]
    if missing:
        raise UserError("morphology evaluation needs a few-shot split "
                        f"(sigmorphon/<lang>/hints-<h>.<i>); missing: {', '.join(missing)}")
    joined = pl.col("tags").list.join(";")
    seen = table.filter(pl.col("split") == "train").select(joined.alias("bundle"))["bundle"]
    sets = {}
    for name, split in MORPH_SETS.items():
        part = table.filter(pl.col("split") == split)
        # the predictor reads analysis pairs: form chars -> lemma chars + tags
        sets[name] = (part.select(source="y", target="x", novel=~joined.is_in(seen.implode()))
                      .unique(subset=["source", "target"], maintain_order=True))
    return sets


def predictor_source(checkpoint: str | Path, backend: str | None = None, beam_width: int = 0,
                     batch_size: int = 256, threads: int | None = None, device=None):
    """A predictor checkpoint or export folder -> (predict(sources) -> token lists, run
    description, max_len). Export folders run on ``backend`` (default ONNX Runtime);
    everything on ``device`` (a ``compgen.device.Device``; default: the CPU)."""
    path = Path(checkpoint)
    if path.is_dir():
        manifest = load_manifest(path)
        if manifest.kind != "seq2seq":
            raise UserError(f"{path}: a '{manifest.kind}' export; evaluate and predict "
                            "take predictor exports (compgen export PREDICTOR.pt)")
        meta = dict(manifest.config.get("run", {}))
        return (lambda sources: predict_exported(path, sources, backend=backend or "onnx",
                                                 batch_size=batch_size, beam_width=beam_width,
                                                 threads=threads, device=device),
                meta, manifest.max_len)

    if backend not in (None, "torch"):
        raise SettingError(f"`backend` {backend} runs on an export folder: first run "
                           f"'compgen export {path}'")
    model, vocab, meta = load_predictor(path)
    if device is not None:
        model.to(device.torch)
    return (lambda sources: predict(model, vocab, sources, batch_size, beam_width), meta,
            model.cfg.max_len)


def evaluate_predictor(checkpoint: str | Path, data: Dataset | str | None = None, data_dir=None,
                       beam_width: int = 0, batch_size: int = 256,
                       predictions: str | Path | None = None,
                       backend: str | None = None, device=None) -> list[dict]:
    """Score one checkpoint (or predictor export folder, on ``backend``) on every
    evaluation set of its data (read as it was for training) or of ``data`` (a Dataset,
    or a name, file or folder read here): rows of
    {model, label, data, seed, set, subset, n, exact_match, f1, n_unfinished}
    (``n_unfinished``: predictions that ran to the model's max_len without ending)."""
    predict_sources, meta, max_len = predictor_source(checkpoint, backend, beam_width, batch_size,
                                                      device=device)
    if data is not None:
        table = evaluation_table(data, data_dir)
        data = data.name if isinstance(data, Dataset) else data
    else:
        data = recorded_data(meta)
        if not data:
            raise SettingError(f"{checkpoint}: names no data set; give `data`")
        check_unchanged(checkpoint, meta, data)
        # read as it was for training (its x and y fields, its columns)
        trained = open_dataset(data, data_dir, Fields.of_source(meta.get("data_source")))
        table = evaluation_table(trained, data_dir, trained_on=data)
    morphology = is_morphology(table)
    if morphology != (meta.get("task") == "morphology"):
        raise UserError(f"{checkpoint}: trained on {meta.get('data')}, cannot evaluate on {data}")
    base = {"model": Path(checkpoint).stem, "label": meta.get("label", "baseline"),
            "data": data, "seed": meta.get("seed")}
    rows, logged = [], []
    for name, part in evaluation_sets(table).items():
        sources, refs = part["source"].to_list(), part["target"].to_list()
        preds = predict_sources(sources)
        scored = score_predictions(preds, refs, morphology, max_len)
        # a prediction that used every step without </s> is cut to max_len - 1 tokens
        unfinished = sum(len(p) >= max_len - 1 for p in preds)
        rows.append({**base, "set": name, "subset": "all", "n": scored["n"],
                     "exact_match": scored["exact_match"], "f1": scored["f1"],
                     "n_unfinished": unfinished})
        if morphology:
            keep = part["novel"].to_list()
            sub = score_predictions([p for p, k in zip(preds, keep) if k],
                                    [r for r, k in zip(refs, keep) if k], True, max_len)
            rows.append({**base, "set": name, "subset": "novel", "n": sub["n"],
                         "exact_match": sub["exact_match"], "f1": sub["f1"]})
        logged += [(name, s, r, p, c) for s, r, p, c in zip(sources, refs, preds, scored["correct"])]
    if morphology:
        rows += _hard_rows(rows)
    if predictions:
        lines = ["#set\tsource\treference\tprediction\tcorrect"]
        lines += [f"{n}\t{' '.join(s)}\t{' '.join(r)}\t{' '.join(p)}\t{int(c)}"
                  for n, s, r, p, c in logged]
        with atomic_open(predictions, "w", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    return rows


def _hard_rows(rows: list[dict]) -> list[dict]:
    """FUT+PST = the mean of the FUT and PST scores (the paper's hard column)."""
    out = []
    for subset in ("all", "novel"):
        fut = next(r for r in rows if r["set"] == "FUT" and r["subset"] == subset)
        pst = next(r for r in rows if r["set"] == "PST" and r["subset"] == subset)
        out.append({**fut, "set": "FUT+PST", "n": fut["n"] + pst["n"],
                    "exact_match": (fut["exact_match"] + pst["exact_match"]) / 2,
                    "f1": (fut["f1"] + pst["f1"]) / 2})
    return out


# ------------------------------------------------------------------ tables

def aggregate(rows: Sequence[dict]) -> pl.DataFrame:
    """Mean and population std (ddof 0) over models (seeds) per (data, label, set, subset)."""
    df = pl.DataFrame(rows)
    keys = ["data", "label", "set", "subset"]
    return (df.group_by(keys, maintain_order=True)
            .agg(pl.len().alias("models"), pl.col("n").first(),
                 pl.col("exact_match").mean().alias("exact_match_mean"),
                 pl.col("exact_match").std(ddof=0).alias("exact_match_std"),
                 pl.col("f1").mean().alias("f1_mean"),
                 pl.col("f1").std(ddof=0).alias("f1_std")))


def _fmt(mean: float, std: float) -> str:
    if mean is None or math.isnan(mean):
        return "nan"
    return f"{mean:.3f} ± {std:.3f}"


def markdown_table(summary: pl.DataFrame) -> str:
    lines = ["| data | label | set | subset | n | models | exact match | F1 |",
             "|---|---|---|---|---:|---:|---:|---:|"]
    for r in summary.iter_rows(named=True):
        lines.append(f"| {r['data']} | {r['label']} | {r['set']} | {r['subset']} | {r['n']} | "
                     f"{r['models']} | {_fmt(r['exact_match_mean'], r['exact_match_std'])} | "
                     f"{_fmt(r['f1_mean'], r['f1_std'])} |")
    return "\n".join(lines) + "\n"


def write_results(rows: Sequence[dict], out: str | Path) -> dict[str, Path]:
    """``out`` (CSV, one row per model and set), ``<out>.summary.csv`` (mean ± std over
    models) and ``<out stem>.md`` (Markdown of both); all written atomically."""
    out = Path(out)
    summary = aggregate(rows)
    paths = {"csv": out, "summary": out.with_name(out.stem + ".summary.csv"),
             "markdown": out.with_suffix(".md")}
    for path, text in ((paths["csv"], pl.DataFrame(rows).write_csv()),
                       (paths["summary"], summary.write_csv())):
        with atomic_open(path, "w", encoding="utf-8") as f:
            f.write(text)
    per_model = ["| model | set | subset | n | exact match | F1 |", "|---|---|---|---:|---:|---:|"]
    per_model += [f"| {r['model']} | {r['set']} | {r['subset']} | {r['n']} | "
                  f"{r['exact_match']:.4f} | {r['f1']:.4f} |" for r in rows]
    with atomic_open(paths["markdown"], "w", encoding="utf-8") as f:
        f.write("## Summary (mean ± population std over models)\n\n" + markdown_table(summary)
                + "\n## Per model\n\n" + "\n".join(per_model) + "\n")
    return paths


# ------------------------------------------------------------------ figures

def write_plots(checkpoint: str | Path, folder: str | Path, data: Dataset | str | None = None,
                data_dir=None, n_attention: int = 2) -> list[Path]:
    """Learning curve (from the curve stored in the checkpoint) and attention heat-maps of
    the first ``n_attention`` evaluation examples, as PNG files in ``folder``."""
    model, vocab, meta = load_predictor(checkpoint)
    folder, stem = Path(folder), Path(checkpoint).stem
    written = []
    if meta.get("curve"):
        csv = folder / f"{stem}.curve.csv"
        write_curve_csv(meta["curve"], csv)
        written.append(plot_learning_curve(csv, folder / f"{stem}.curve.png"))
    if data is None:   # the model's own data, read as it was for training
        data = open_dataset(meta["data"], data_dir, Fields.of_source(meta.get("data_source")))
    sets = evaluation_sets(evaluation_table(data, data_dir))
    first = next(iter(sets.values()))
    for k, source in enumerate(first["source"].to_list()[:n_attention]):
        ids, attention = greedy_search(model, collate([vocab.encode(source)], model.cfg.max_len),
                                       return_attention=True)
        pred = cut_prediction(ids[0].tolist())
        steps = len(pred) + 1 if len(pred) < ids.size(1) else len(pred)  # include </s>
        rows = [vocab.tokens[t] for t in ids[0, :steps].tolist()]
        cols = ["<s>"] + list(source[: model.cfg.max_len]) + (["</s>"] if len(source) <= model.cfg.max_len else [])
        matrix = attention[0, :steps, : len(cols)].numpy()
        written.append(plot_attention(matrix, rows, cols, folder / f"{stem}.attention{k}.png",
                                      title=" ".join(source)))
    return written


def write_generator_plots(checkpoint: str | Path, folder: str | Path, data_dir=None,
                          n_samples: int = 1, seed: int = 0) -> list[Path]:
    """Figures of a generator checkpoint as PNG files in ``folder``: its training curve
    (from ``<checkpoint>.loss.csv`` when present) and, for scan generators with
    prototypes, the attention heat-map of ``n_samples`` greedy samples drawn from Omega
    (the paper's Fig. 3): per prototype position and step, plus the copy probability."""
    model, vocab, config = load_generator(checkpoint)
    folder, stem = Path(folder), Path(checkpoint).stem
    written = []
    curve = Path(str(checkpoint) + ".loss.csv")  # written next to it by train_generator
    if curve.is_file():
        written.append(plot_learning_curve(curve, folder / f"{stem}.curve.png", x="step"))
    if not (model.scan and model.nproto > 0):
        return written
    table = load_dataset(config["data"], data_dir)
    tuples = prototype_source(config, table, model.nproto, seed)(n_samples)
    protos = collate_prototypes([[vocab.encode(p) for p in tup] for tup in tuples], "scan",
                                model.cfg.max_len)
    torch.manual_seed(seed)  # the scan generator keeps dropout on while sampling
    decoded, weights = greedy_with_weights(model, protos, model.cfg.max_len)
    for b in range(protos.size(0)):
        ids = decoded.tokens[b].tolist()
        steps = ids.index(EOS_ID) + 1 if EOS_ID in ids else len(ids)  # up to and with </s>
        rows = [vocab.tokens[t] for t in ids[:steps]]
        real = [is_real(protos[b, k]) for k in range(model.nproto)]  # drop the padding
        columns = [[vocab.tokens[t] for t in protos[b, k][real[k]].tolist()]
                   for k in range(model.nproto)]
        attention = [weights.attention[b, :steps, k][:, real[k]].numpy()
                     for k in range(model.nproto)]
        copy_prob = weights.copy[b, :steps].sum((1, 2)).numpy()
        written.append(plot_generator_attention(
            attention, rows, columns, copy_prob, folder / f"{stem}.attention{b}.png",
            title=" ".join(rows)))
    return written
