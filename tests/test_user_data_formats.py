"""Every step on every format of the shipped numbers set (tests/data/numbers: tsv/, jsonl/,
csv/, parquet/ folders of the same train/dev/test split), from the command line (in-process)
and from the Python API, with real torch, ONNX Runtime, the C++ runner and lmplz, at the
smallest sizes that still do each step.

What differs between formats is how the data is read; so the steps that read the data
folder run once per format (stats, GECA, CSL, a generator of 30 updates, a predictor of one
epoch with and without GECA's rows, its evaluation on the folder's test split, KenLM on the
y side), and each asserts that it got the same pairs as from the TSV folder. Export and
sampling read only the checkpoint: the generators trained from the four formats record the
same training pairs, rare tokens and prototype lengths (asserted), so one of them (trained
one epoch from CSV on the command line, from JSONL in Python) is exported and sampled on ONNX Runtime
and the C++ runner. tests/test_user_data.py runs stats, GECA and a predictor with GECA's
rows evaluated on the test split from the command line on every format; this file runs the
rest."""

import sys
from pathlib import Path

import polars as pl
import pytest

import compgen
from compgen.cli import main
from compgen.errors import UserError
from compgen.training.checkpoint import load_checkpoint

NUMBERS = Path(__file__).resolve().parent / "data" / "numbers"
FORMATS = ("tsv", "jsonl", "csv", "parquet")
ORACLE = f"{sys.executable} {NUMBERS / 'number_words.py'}"
RARE = {"9", "nine", "nineteen", "ninety"}
COUNTS = {"train": 732, "dev": 40, "test": 100}
SHORT_GENERATOR = ("--hidden", 32, "--embed", 16, "--attdim", 16,
                   "--batch-size", 32, "--threads", 1, "--quiet")
# 30 updates read the data and train; the one exported trains one epoch (~250 updates), as a
# generator of 30 updates rarely writes a sample that passes the filter
STEPS = {"exported": ("--epochs", 1), "others": ("--max-steps", 30)}
TINY_GENERATOR = {"model.hidden": 32, "model.embed": 16, "model.attdim": 16,
                  "train.batch_size": 32, "train.threads": 1}
CSL = ("--n", 20, "--steps", 10, "--dedup", "--threads", 1)


def cli(capsys, monkeypatch, *args) -> str:
    """stdout of ``compgen ARGS`` run in-process; fails unless it exits 0."""
    monkeypatch.setattr(sys, "argv", ["compgen", *map(str, args)])
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as stop:
        main()
    out, err = capsys.readouterr()
    assert stop.value.code == 0, f"compgen {' '.join(map(str, args))}\n{err[-2000:]}"
    return out


def snapshot(checkpoint: Path) -> dict:
    """What sampling an export of the generator takes from its data."""
    data = load_checkpoint(checkpoint).config["data_snapshot"]
    return {key: data[key] for key in ("pairs", "rare", "prototype_lengths", "neighborhood")}


def test_scores(csv: Path) -> pl.DataFrame:
    return pl.read_csv(csv).filter(pl.col("set") == "test")


test_scores.__test__ = False   # a helper, not a test


@pytest.fixture(scope="module")
def tsv_reference(tmp_path_factory):
    """The TSV folder's CSL rows and y-side KenLM model, which every format must give."""
    work = tmp_path_factory.mktemp("reference")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.setattr(sys, "argv", ["compgen", "augment", "csl", str(NUMBERS / "tsv"),
                                          "-o", str(work / "csl.tsv"), *map(str, CSL)])
        with pytest.raises(SystemExit) as stop:
            main()
        assert stop.value.code == 0
    compgen.kenlm_train(NUMBERS / "tsv", work / "y.arpa", order=3, side="y",
                        discount_fallback=True)
    return {"csl": (work / "csl.tsv").read_text(), "arpa": (work / "y.arpa").read_bytes()}


# ------------------------------------------------------------------ command line

@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_csl_predictor_and_kenlm_on_every_format(tmp_path, capsys, monkeypatch, fmt,
                                                      tsv_reference):
    folder = NUMBERS / fmt
    cli(capsys, monkeypatch, "augment", "csl", folder, "-o", tmp_path / "csl.tsv", *CSL)
    assert (tmp_path / "csl.tsv").read_text() == tsv_reference["csl"] != ""
    cli(capsys, monkeypatch, "train", "predictor", "--data", folder, "-o", tmp_path / "p.pt",
        "--epochs", 1, "--threads", 1)
    cli(capsys, monkeypatch, "evaluate", tmp_path / "p.pt", "--data", folder,
        "-o", tmp_path / "r.csv")
    scores = test_scores(tmp_path / "r.csv")
    assert scores["n"].to_list() == [COUNTS["test"]] and 0.0 <= scores["exact_match"][0] <= 1.0
    out = cli(capsys, monkeypatch, "lm", "train", folder, "--side", "y", "-o", tmp_path / "y.arpa",
              "--order", 3, "--discount-fallback")
    assert f"{COUNTS['train']} pairs" in out
    assert (tmp_path / "y.arpa").read_bytes() == tsv_reference["arpa"]


def test_cli_generator_on_every_format_then_export_and_sample(tmp_path, capsys, monkeypatch):
    snapshots = {}
    for fmt in FORMATS:
        cli(capsys, monkeypatch, "train", "generator", "--data", NUMBERS / fmt,
            "-o", tmp_path / f"{fmt}.pt", *SHORT_GENERATOR,
            *STEPS["exported" if fmt == "csv" else "others"])
        snapshots[fmt] = snapshot(tmp_path / f"{fmt}.pt")
    assert len(snapshots["tsv"]["pairs"]) == COUNTS["train"]
    assert all(s == snapshots["tsv"] for s in snapshots.values())   # the same data from each
    cli(capsys, monkeypatch, "export", tmp_path / "csv.pt", "-o", tmp_path / "exported",
        "--parity-sets", 8, "--prototypes", 300)
    drawn = {}
    for backend in ("onnx", "cpp"):
        out = cli(capsys, monkeypatch, "sample", tmp_path / "exported", "--backend", backend,
                  "-o", tmp_path / f"{backend}.tsv", "--n", 5, "--nsamples", 5,
                  "--batch-size", 64, "--max-rounds", 8, "--rare", "auto", "--oracle", ORACLE,
                  "--seed", 2, "--threads", 1, "--raise-temperature")
        assert "correct by the oracle" in out
        drawn[backend] = (tmp_path / f"{backend}.tsv").read_text()
        rows = [line.split("\t") for line in drawn[backend].splitlines() if line[:1] != "#"]
        assert rows and all(set(f"{x} {y}".split()) & RARE for x, y, *_ in rows)
    assert drawn["onnx"] == drawn["cpp"]   # same seed, same samples on both runtimes


# ------------------------------------------------------------------ Python

@pytest.mark.parametrize("fmt", FORMATS)
def test_python_steps_on_every_format(tmp_path, fmt, tsv_reference, one_torch_thread):
    """Each function given the folder itself (the format is read by the call), not a
    DataFrame loaded beforehand."""
    folder = NUMBERS / fmt
    data = compgen.load(folder)
    assert dict(data.group_by("split").len().iter_rows()) == COUNTS   # stats
    assert data.equals(compgen.load(NUMBERS / "tsv"))
    extra = compgen.geca(folder, n_sample=40)
    assert extra.height > 0 and extra.equals(compgen.geca(NUMBERS / "tsv", n_sample=40))
    rows = compgen.csl(folder, 20, steps=10)   # what `compgen augment csl` writes
    assert set(rows["split"]) == {"csl"} and rows.height > 0
    assert [f"{' '.join(x)}\t{' '.join(y)}" for x, y in rows.select("x", "y").iter_rows()] == \
        [line for line in tsv_reference["csl"].splitlines() if line[:1] != "#"]
    scores = {}
    for name, augment in (("base", None), ("geca", extra)):
        summary = compgen.train_predictor(folder, tmp_path / f"{name}.pt", augment=augment,
                                          epochs=1)
        assert summary["epochs"] == 1
        result = compgen.evaluate_model(tmp_path / f"{name}.pt", folder)
        test = result.filter(pl.col("set") == "test")
        assert test["n"].to_list() == [COUNTS["test"]]
        scores[name] = test["exact_match"][0]
    assert all(0.0 <= s <= 1.0 for s in scores.values())
    model = compgen.kenlm_train(folder, tmp_path / "y.arpa", order=3, side="y",
                                discount_fallback=True)
    assert Path(model).read_bytes() == tsv_reference["arpa"]
    test_y = [" ".join(y) for y in data.filter(pl.col("split") == "test")["y"]]
    assert 1 < compgen.perplexity(model, test_y) < float("inf")


def test_python_generator_on_every_format_then_export_and_sample(tmp_path, one_torch_thread):
    snapshots = {}
    for fmt in FORMATS:
        steps = {"epochs": 1} if fmt == "jsonl" else {"max_steps": 30}
        result = compgen.train_generator(NUMBERS / fmt, tmp_path / f"{fmt}.pt",
                                         overrides=TINY_GENERATOR, **steps)
        assert result.steps >= 30
        snapshots[fmt] = snapshot(tmp_path / f"{fmt}.pt")
    assert all(s == snapshots["tsv"] for s in snapshots.values())
    manifest = compgen.export_model(tmp_path / "jsonl.pt", tmp_path / "exported", parity_sets=8,
                                    max_prototypes=300)
    assert manifest["kind"] == "recombine"
    drawn = {backend: compgen.sample(tmp_path / "exported", 5, backend=backend, seed=2,
                                     max_rounds=8, threads=1, raise_temperature=True)
             for backend in ("onnx", "cpp")}
    assert drawn["onnx"].height > 0 and drawn["onnx"].equals(drawn["cpp"])
    assert all(set(x + y) & RARE for x, y in drawn["onnx"].select("x", "y").iter_rows())


def test_a_data_file_is_no_kenlm_corpus(tmp_path, capsys, monkeypatch):
    """Read as one sentence a line, a JSONL file gave JSON text as words: now one error
    line asking for a side, from the command line and from Python."""
    for data in (NUMBERS / "jsonl" / "train.jsonl", NUMBERS / "parquet"):
        monkeypatch.setattr(sys, "argv", ["compgen", "lm", "train", str(data),
                                          "-o", str(tmp_path / "m.arpa")])
        with pytest.raises(SystemExit) as stop:
            main()
        lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert stop.value.code == 2 and len(lines) == 1, lines
        assert lines[0].startswith(f"error: {data}: ") and "--side" in lines[0]
        with pytest.raises(UserError, match="not a corpus"):
            compgen.kenlm_train(data, tmp_path / "m.arpa")
    assert not (tmp_path / "m.arpa").exists()
