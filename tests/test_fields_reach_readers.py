"""``--x-field/--y-field`` reach the reader of every command that reads the user's pairs:
a JSONL file whose fields have other names than the usual ones is one ``error:`` line
without them and reads with them."""

import json

import polars as pl
from cli_in_process import assert_one_error, run

from compgen.training.checkpoint import load_checkpoint

NUMBERS = "tests/data/numbers/jsonl"
FIELDS = ("--x-field", "question", "--y-field", "answer")


def renamed(folder, name: str = "numbers", rows: int | None = None):
    """The numbers data set (train/dev/test JSONL) with its fields named question, answer."""
    out = folder / name
    out.mkdir()
    for split in ("train", "dev", "test"):
        table = pl.read_ndjson(f"{NUMBERS}/{split}.jsonl")
        lines = table.rename({"input": "question", "output": "answer"}) \
            .head(rows or table.height).write_ndjson()
        (out / f"{split}.jsonl").write_text(lines)
    return out


def assert_missing_field(result):
    assert_one_error(result, "no input (x) field", "--x-field")


def test_train_predictor_reads_data_and_augment_with_the_fields(tmp_path, capsys, monkeypatch):
    data = renamed(tmp_path, rows=60)
    augment = tmp_path / "augment.jsonl"
    augment.write_text("".join(json.dumps({"question": "9 9 9", "answer": "nine hundred ninety nine"})
                               + "\n" for _ in range(3)))
    model = tmp_path / "p.pt"
    train = ("train", "predictor", "--data", data, "-o", model, "--epochs", "1", "--threads",
             "1", "--hidden", "8")
    assert_missing_field(run(capsys, monkeypatch, *train))
    assert not model.exists()
    code, lines, _ = run(capsys, monkeypatch, *train, "--augment", augment, *FIELDS)
    assert code == 0, lines
    recorded = load_checkpoint(model).config["run"]
    assert recorded["n_train"] == 60 and recorded["n_augmented"] == 1
    assert recorded["data_source"]["fields"] == {"x": "question", "y": "answer"}


def test_evaluate_reads_data_with_the_fields_and_a_model_its_own(tmp_path, capsys, monkeypatch):
    data = renamed(tmp_path, rows=40)
    model = tmp_path / "p.pt"
    code, lines, _ = run(capsys, monkeypatch, "train", "predictor", "--data", data, "-o", model,
                         "--epochs", "1", "--threads", "1", "--hidden", "8", *FIELDS)
    assert code == 0, lines
    evaluate = ("evaluate", model, "--data", data)
    assert_missing_field(run(capsys, monkeypatch, *evaluate))
    code, lines, out = run(capsys, monkeypatch, *evaluate, *FIELDS)
    assert code == 0 and "test" in out, lines
    # without --data: the model's data, read with the fields it was trained with
    code, lines, again = run(capsys, monkeypatch, "evaluate", model)
    assert code == 0 and again == out, lines
    # so does the export's parity check on the test split
    code, lines, _ = run(capsys, monkeypatch, "export", model, "-o", tmp_path / "exported",
                         "--parity-sets", "4")
    assert code == 0 and (tmp_path / "exported" / "manifest.json").is_file(), lines


def test_data_stats_reads_with_the_fields(tmp_path, capsys, monkeypatch):
    data = renamed(tmp_path)
    assert_missing_field(run(capsys, monkeypatch, "data", "stats", data))
    code, lines, out = run(capsys, monkeypatch, "data", "stats", data, *FIELDS)
    assert code == 0 and "732" in out, lines


def test_augment_geca_reads_with_the_fields(tmp_path, capsys, monkeypatch):
    data = renamed(tmp_path)
    out = tmp_path / "geca.tsv"
    geca = ("augment", "geca", data, "-o", out, "--variants", "all", "--n-sample", "40")
    assert_missing_field(run(capsys, monkeypatch, *geca))
    assert not out.exists()
    code, lines, _ = run(capsys, monkeypatch, *geca, *FIELDS)
    assert code == 0, lines
    reference = tmp_path / "reference.tsv"   # the same rows as from the usual field names
    code, lines, _ = run(capsys, monkeypatch, "augment", "geca", NUMBERS, "-o", reference,
                         "--variants", "all", "--n-sample", "40")
    assert code == 0 and out.read_text() == reference.read_text() != "", lines


def test_augment_csl_and_evaluate_grammar_read_with_the_fields(tmp_path, capsys, monkeypatch):
    data = renamed(tmp_path, rows=30)
    out, grammar = tmp_path / "csl.tsv", tmp_path / "grammar.txt"
    csl = ("augment", "csl", data, "-o", out, "--n", "20", "--steps", "2", "--grammar-out",
           grammar, "--threads", "1")
    assert_missing_field(run(capsys, monkeypatch, *csl))
    assert not out.exists()
    code, lines, _ = run(capsys, monkeypatch, *csl, *FIELDS)
    assert code == 0 and out.read_text().count("\n") > 0, lines
    evaluate = ("evaluate-grammar", grammar, "--data", data, "--steps", "2", "--threads", "1")
    assert_missing_field(run(capsys, monkeypatch, *evaluate))
    code, lines, report = run(capsys, monkeypatch, *evaluate, *FIELDS)
    assert code == 0 and str(data) in report, lines


def test_lm_train_side_reads_with_the_fields(tmp_path, capsys, monkeypatch):
    data = renamed(tmp_path)
    model = tmp_path / "y.arpa"
    train = ("lm", "train", data, "--side", "y", "-o", model, "--order", "2",
             "--discount-fallback")
    assert_missing_field(run(capsys, monkeypatch, *train))
    code, lines, out = run(capsys, monkeypatch, *train, *FIELDS)
    assert code == 0 and "732 pairs" in out and model.is_file(), lines
    assert_one_error(run(capsys, monkeypatch, "lm", "train", data / "train.jsonl", "-o", model,
                         *FIELDS), "--side")


def test_pipeline_own_reads_with_the_fields(tmp_path, capsys, monkeypatch):
    data = renamed(tmp_path, rows=40)
    own = ("pipeline", "own", "--data", data, "--rows", "baseline,geca", "--predictor-epochs",
           "1", "--root", tmp_path / "runs", "--threads", "1")
    assert_missing_field(run(capsys, monkeypatch, *own))
    assert not (tmp_path / "runs").exists()
    code, lines, _ = run(capsys, monkeypatch, *own, *FIELDS)
    assert code == 0, lines
    results = pl.read_csv(tmp_path / "runs" / "results.csv").filter(pl.col("set") == "test")
    assert sorted(results["run"]) == ["own-baseline", "own-geca"]
    assert (tmp_path / "runs" / "own-geca" / "seed0" / "augment.tsv").stat().st_size > 0
    for row in ("own-baseline", "own-geca"):
        recorded = load_checkpoint(tmp_path / "runs" / row / "seed0" / "predictor.pt").config["run"]
        assert recorded["n_train"] == 40
        assert recorded["data_source"]["fields"] == {"x": "question", "y": "answer"}


def test_settings_are_refused_before_the_data_is_read(tmp_path, capsys, monkeypatch):
    """Reading the data once in the command must not come before the cheap checks: with a
    data file that is not there, the bad setting is what the error line names."""
    missing = tmp_path / "missing.jsonl"
    assert_one_error(run(capsys, monkeypatch, "augment", "csl", missing, "--n", "-1", "-o",
                         tmp_path / "o.tsv", *FIELDS), "--n")
    assert_one_error(run(capsys, monkeypatch, "pipeline", "own", "--data", missing, "--rows",
                         "bogus", "--root", tmp_path / "runs", *FIELDS), "--rows")
    assert not (tmp_path / "o.tsv").exists()
