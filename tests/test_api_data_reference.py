"""A predictor trained from a DataFrame keeps its data: the table is saved beside the
checkpoint and recorded by path and sha256, so `compgen evaluate CKPT` works after the
call (it used to name a removed temporary folder); the package lists its API."""

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import compgen
from compgen.cli import main
from compgen.data.table import save_table_folder, table_digest
from compgen.errors import UserError
from compgen.training.checkpoint import load_checkpoint

NUMBERS = Path(__file__).resolve().parent / "data" / "numbers"


def run(capsys, monkeypatch, *args):
    monkeypatch.setattr(sys, "argv", ["compgen", *map(str, args)])
    with pytest.raises(SystemExit) as stop:
        main()
    out, err = capsys.readouterr()
    return stop.value.code, err, out


def test_a_checkpoint_from_a_dataframe_evaluates_later(tmp_path, capsys, monkeypatch,
                                                       one_torch_thread):
    frame = pl.read_parquet(NUMBERS / "parquet" / "train.parquet").head(80)
    test = pl.read_parquet(NUMBERS / "parquet" / "test.parquet").head(20)
    data = pl.concat([frame.with_columns(split=pl.lit("train")),
                      test.with_columns(split=pl.lit("test"))])
    model = tmp_path / "p.pt"
    compgen.train_predictor(data, model, epochs=1)
    run_record = load_checkpoint(model).config["run"]
    saved = Path(run_record["data_source"]["path"])
    assert saved == tmp_path / "p.pt.data" and saved.is_dir()
    assert len(run_record["data_source"]["sha256"]) == 64
    assert table_digest(compgen.load(saved)) == table_digest(compgen.load(data))
    monkeypatch.chdir(tmp_path.parent)   # from elsewhere: the recorded path still resolves
    code, err, out = run(capsys, monkeypatch, "evaluate", model)
    assert code == 0 and "test" in out, err
    # the saved table edited: an error, not an evaluation on other rows
    pl.read_parquet(saved / "test.parquet").head(5).write_parquet(saved / "test.parquet")
    code, err, _ = run(capsys, monkeypatch, "evaluate", model)
    assert code == 2 and "changed since" in err and "--data" in err, err


def test_the_saved_table_is_kept_when_unchanged_and_a_failed_run_leaves_none(tmp_path):
    data = compgen.load(NUMBERS / "parquet").head(50)
    folder = save_table_folder(data, tmp_path / "m.pt.data")
    before = (folder / "train.parquet").stat().st_mtime_ns
    assert save_table_folder(data, folder) == folder
    assert (folder / "train.parquet").stat().st_mtime_ns == before
    save_table_folder(data.head(10), folder)   # other rows replace it whole
    assert compgen.load(folder).height == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pt.data"]   # no staging left
    other = tmp_path / "mine"
    other.mkdir()
    (other / "notes.txt").write_text("keep")
    with pytest.raises(UserError, match="other files"):
        save_table_folder(data, other)
    with pytest.raises(UserError):
        compgen.train_predictor(data, tmp_path / "bad.pt", config="no_such_preset", epochs=1)
    assert not (tmp_path / "bad.pt.data").exists()


def test_dir_lists_the_api_and_import_loads_no_torch():
    assert set(compgen.__all__) <= set(dir(compgen))
    code = ("import sys, compgen; names = dir(compgen); "
            "assert 'train_predictor' in names and 'load' in names; "
            "assert 'torch' not in sys.modules and 'polars' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
