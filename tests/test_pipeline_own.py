"""`compgen pipeline own --data PATH`: the baseline, GECA and R&R rows on a user's data set,
over seeds, resumable, with one error line for a missing --data or an unknown row."""


import polars as pl
import pytest
from cli_in_process import run
from typer.testing import CliRunner

from compgen.cli import app
from compgen.data.dataset import open_dataset
from compgen.pipelines.runs import own_runs

NUMBERS = "tests/data/numbers/tsv"


def pipeline(*args):
    return CliRunner().invoke(app, ["pipeline", *map(str, args)])




def test_own_rows_over_two_seeds_then_resumed(tmp_path):
    args = ("own", "--data", NUMBERS, "--rows", "baseline,geca", "--seeds", "0-1",
            "--predictor-epochs", 1, "--root", tmp_path, "--threads", 1)
    result = pipeline(*args)
    assert result.exit_code == 0, result.output
    results = pl.read_csv(tmp_path / "results.csv").filter(pl.col("set") == "test")
    assert sorted(results.select("run", "seed").rows()) == [
        ("own-baseline", 0), ("own-baseline", 1), ("own-geca", 0), ("own-geca", 1)]
    assert set(results["data"]) == {NUMBERS}
    assert (tmp_path / "own-geca" / "seed1" / "augment.tsv").stat().st_size > 0
    trained = {p: p.stat().st_mtime_ns for p in tmp_path.glob("own-*/seed*/predictor.pt")}
    assert len(trained) == 4
    again = pipeline(*args)   # everything is done: nothing is trained again
    assert again.exit_code == 0, again.output
    assert {p: p.stat().st_mtime_ns for p in trained} == trained


def test_own_needs_data_and_known_rows(tmp_path, capsys, monkeypatch):
    for args, message in ((("own",), "needs --data"),
                          (("own", "--data", NUMBERS, "--rows", "baseline,magic"), "rows"),
                          (("jump-baseline", "--data", NUMBERS), "--data applies to"),
                          (("own", "--data", tmp_path / "missing.tsv"), "missing.tsv")):
        code, lines, _ = run(capsys, monkeypatch, "pipeline", *args, "--root", tmp_path)
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), lines
        assert message in lines[0], lines[0]
        assert not list(tmp_path.glob("own-*"))


def test_own_rows_use_the_sized_predictor_and_the_generic_generator():
    dataset = open_dataset(NUMBERS)
    baseline, geca, recomb2 = own_runs(dataset)
    assert all(r.dataset_for(0) is dataset and r.data == str(NUMBERS)
               for r in (baseline, geca, recomb2))
    assert [r.name for r in (baseline, geca, recomb2)] == ["own-baseline", "own-geca", "own-recomb2"]
    assert baseline.presets[1] is None and recomb2.generator == {"model.nproto": 2}
    assert geca.augment == "geca" and recomb2.sample["resample"] == "rare"


def test_a_csl_row_whose_grammar_derives_no_test_pair_stops_before_the_predictor(tmp_path,
                                                                                  monkeypatch):
    from compgen.errors import UserError
    from compgen.pipelines import runs
    from compgen.pipelines.rows import Run
    from compgen.pipelines.runs import PipelineOptions, Timer, make_csl

    monkeypatch.setattr(runs, "CSL_SAMPLES", 200)   # the row's 100,000 samples take a minute

    data = tmp_path / "data"
    data.mkdir()
    words = {"jump": "J", "walk": "W", "look": "L"}
    train = [f"{w}\t{a}" for w, a in words.items()]
    train += [f"{w} twice\t{a} {a}" for w, a in words.items()]
    (data / "train.tsv").write_text("\n".join(train) + "\n")
    (data / "test.tsv").write_text("swim twice\tS S\n")   # a word no training pair has
    run = Run("own-csl", str(data), "CSL", augment="csl", task="own")
    folder = tmp_path / "run"
    folder.mkdir()
    with pytest.raises(UserError, match="derives none of the held-out pairs .test_coverage 0 %"):
        make_csl(run, 0, folder, PipelineOptions(root=tmp_path, log=lambda line: None),
                 Timer(folder / "timing.json"))
    assert not (folder / "augment.tsv").exists() and (folder / "grammar.txt").is_file()
