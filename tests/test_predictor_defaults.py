"""The predictor on a user's own data: settings sized from the data (max_len, supervised
copying, epochs, restore_best), a warning with a count whenever pairs are cut, preset
overrides from the CLI and the Python API, and the API's threads."""

import math
from pathlib import Path

import polars as pl
import pytest
import torch
from typer.testing import CliRunner

import compgen
from compgen.cli import app
from compgen.errors import SettingError, UserError
from compgen.training.predictor import read_predictor, train_predictor
from compgen.training.predictor_defaults import copy_share, sized_preset

pytestmark = pytest.mark.usefixtures("one_torch_thread")
NUMBERS = "tests/data/numbers/tsv"


def table(pairs, split="train"):
    return pl.DataFrame({"x": [x.split() for x, _ in pairs], "y": [y.split() for _, y in pairs],
                         "split": [split] * len(pairs)})


def test_settings_sized_from_the_data():
    shared = table([("capital of utah", "SELECT capital WHERE name = utah"),
                    ("size of ohio", "SELECT area WHERE name = ohio"),
                    ("how big is texas " + "really " * 30, "SELECT area WHERE name = texas")])
    preset = sized_preset(shared)
    assert preset["model"]["copy_sup"] is True
    assert preset["model"]["max_len"] == math.ceil(1.5 * 34)   # the longest input
    assert preset["train"]["restore_best"] is True
    # three pairs: an epoch is 32 drawn batches, so the schedule counts in useful units
    assert preset["train"]["batches_per_epoch"] == 32
    assert preset["train"]["epochs"] * 32 >= 1600
    # 4,000 pairs: an epoch is one pass (63 batches), and the epochs shrink to match
    big = table([("a b", "b c")] * 4000)
    assert sized_preset(big)["train"]["batches_per_epoch"] == 0
    assert sized_preset(big)["train"]["epochs"] < preset["train"]["epochs"]
    # commands -> actions share no word: no copying
    scanlike = table([("jump twice", "I_JUMP I_JUMP"), ("walk", "I_WALK")])
    assert copy_share(scanlike) == 0.0 and sized_preset(scanlike)["model"]["copy_sup"] is False


def test_numbers_data_gets_sized_settings_and_says_nothing_is_cut(tmp_path):
    lines = []
    train_predictor(NUMBERS, None, tmp_path / "p.pt", epochs=1, log=lines.append,
                    overrides={"model.hidden": 16})
    config = read_predictor(tmp_path / "p.pt").config
    longest = max(len(side.split()) for path in ("train", "dev")
                  for line in Path(f"{NUMBERS}/{path}.tsv").read_text(encoding="utf-8").splitlines()
                  for side in line.rstrip("\n").split("\t"))
    assert config["model"]["max_len"] == max(16, math.ceil(1.5 * longest))
    assert config["model"]["hidden"] == 16
    assert not [line for line in lines if line.startswith("warning:")]


def test_every_cut_is_counted_in_a_warning(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    train = [f"{a} {b}\tadd {a} and {b} " + "then stop " * (k % 4) for k, (a, b) in
             enumerate((a, b) for a in range(6) for b in range(6))]
    (data / "train.tsv").write_text("\n".join(train) + "\n")
    (data / "dev.tsv").write_text("\n".join(train[:5]) + "\n")
    long_y = [line for line in train if len(line.split("\t")[1].split()) > 8]
    (tmp_path / "aug.tsv").write_text("\n".join(train[:10]) + "\n")
    lines = []
    train_predictor(str(data), None, tmp_path / "p.pt", augment=tmp_path / "aug.tsv", epochs=1,
                    log=lines.append, overrides={"model.hidden": 16, "model.max_len": 8})
    warnings = [line for line in lines if line.startswith("warning:")]
    assert f"warning: {len(long_y)} of {len(train)} training pairs are longer than max_len 8" in warnings[0]
    n_aug_long = sum(1 for line in train[:10] if line in long_y)
    assert any(f"{n_aug_long} of 10 augmented pairs" in w for w in warnings)
    assert read_predictor(tmp_path / "p.pt").config["run"]["n_augmented_too_long"] == n_aug_long


def test_overrides_name_a_wrong_section(tmp_path):
    with pytest.raises(SettingError, match="sample.n"):
        train_predictor(NUMBERS, None, tmp_path / "p.pt", epochs=1, overrides={"sample.n": 3})


def test_the_cli_options_reach_the_model(tmp_path):
    result = CliRunner().invoke(app, ["train", "predictor", "--data", NUMBERS, "-o",
                                      str(tmp_path / "p.pt"), "--epochs", "1", "--hidden", "24",
                                      "--max-len", "20", "--no-copy"])
    assert result.exit_code == 0, result.output
    model = read_predictor(tmp_path / "p.pt").config["model"]
    assert (model["hidden"], model["max_len"], model["copy_sup"]) == (24, 20, False)


def test_the_api_takes_overrides_and_threads_and_restores_the_threads(tmp_path):
    before = torch.get_num_threads()
    summary = compgen.train_predictor(NUMBERS, tmp_path / "p.pt", epochs=1, threads=2,
                                      overrides={"model.hidden": 16})
    assert summary["epochs"] == 1 and torch.get_num_threads() == before
    with pytest.raises(UserError, match="threads"):
        compgen.train_predictor(NUMBERS, tmp_path / "q.pt", epochs=1, threads=0)


def test_dev_ties_in_exact_match_are_broken_by_token_f1_only_when_asked():
    from compgen.configs import PredictorTrainConfig
    from compgen.training.predictor import improved

    assert not improved(0.0, 0.5, 0.0, 0.4, "exact_match")
    assert improved(0.0, 0.5, 0.0, 0.4, "exact_match+f1")
    assert improved(0.1, 0.1, 0.0, 0.9, "exact_match+f1")        # exact match decides first
    assert not improved(0.0, 0.9, 0.1, 0.1, "exact_match+f1")
    assert sized_preset(table([("a b", "b c")]))["train"]["monitor"] == "exact_match+f1"
    with pytest.raises(SettingError, match="monitor"):
        PredictorTrainConfig.from_dict({"monitor": "loss"})


def test_the_restored_epoch_named_is_the_one_the_dev_rule_chose(tmp_path):
    from compgen.training.predictor import improved

    lines = []
    train_predictor(NUMBERS, None, tmp_path / "p.pt", epochs=4, log=lines.append,
                    overrides={"model.hidden": 32, "train.batches_per_epoch": 4})
    curve = read_predictor(tmp_path / "p.pt").train_state["curve"]
    best, best_acc, best_f1 = 0, 0.0, 0.0
    for row in curve:
        if improved(row["dev_exact_match"], row["dev_f1"], best_acc, best_f1, "exact_match+f1"):
            best, best_acc, best_f1 = row["epoch"], row["dev_exact_match"], row["dev_f1"]
    restored = [line for line in lines if line.startswith("restored the best")]
    assert restored and f"(epoch {best}," in restored[0]


def test_predictions_cut_at_max_len_are_counted_and_named(tmp_path, capsys, monkeypatch):
    import sys

    from compgen.cli import main
    from compgen.evaluation.evaluate import evaluate_predictor

    train_predictor(NUMBERS, None, tmp_path / "p.pt", epochs=1,
                    overrides={"model.hidden": 16, "model.max_len": 3})
    rows = {r["set"]: r for r in evaluate_predictor(tmp_path / "p.pt")}
    longer = sum(1 for line in Path(f"{NUMBERS}/test.tsv").read_text().splitlines()
                 if len(line.split("\t")[1].split()) > 2)
    assert rows["test"]["n_unfinished"] >= longer > 0
    monkeypatch.setattr(sys, "argv", ["compgen", "evaluate", str(tmp_path / "p.pt")])
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 0
    warning = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert any(f"{rows['test']['n_unfinished']} of {rows['test']['n']} predictions on test" in w
               for w in warning), warning


@pytest.mark.parametrize("suffix", ["jsonl", "csv"])
def test_augment_takes_every_format_data_takes(tmp_path, suffix):
    extra = pl.DataFrame({"x": ["9 9 9", "9 1"], "y": ["nine hundred ninety nine", "ninety one"]})
    path = tmp_path / f"extra.{suffix}"
    extra.write_ndjson(path) if suffix == "jsonl" else extra.write_csv(path)
    result = CliRunner().invoke(app, ["train", "predictor", "--data", NUMBERS, "--augment", str(path),
                                      "-o", str(tmp_path / "p.pt"), "--epochs", "1", "--hidden", "16"])
    assert result.exit_code == 0, result.output
    assert read_predictor(tmp_path / "p.pt").config["run"]["n_augmented"] == 2


@pytest.mark.parametrize("overrides, message", [
    ({"model.max_len": 0}, "'max_len' must be >= 1"),
    ({"model.hidden": -3}, "'hidden' must be >= 1"),
    ({"model.pdrop": 1.5}, "'pdrop' must be in"),
    (5, "overrides`? must be a dict"),
])
def test_impossible_sizes_are_refused_before_training(tmp_path, overrides, message):
    with pytest.raises(UserError, match=message):
        train_predictor(NUMBERS, None, tmp_path / "p.pt", epochs=1, overrides=overrides)
    assert not (tmp_path / "p.pt").exists()
