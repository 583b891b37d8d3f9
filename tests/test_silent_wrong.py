"""Arguments that used to give a silently wrong result are refused in one line: a device
the environment asks for and the machine lacks, Python API arguments of the wrong type or
out of range (never rounded, wrapped or read as true)."""

import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

import compgen
from compgen.errors import SettingError, UserError

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"
NUMBERS = ROOT / "tests" / "data" / "numbers" / "jsonl"


def gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@pytest.mark.skipif(gpus() > 0, reason="this machine has a GPU: COMPGEN_DEVICE=cuda is right")
def test_compgen_device_cuda_without_a_gpu_is_an_error(tmp_path):
    out = tmp_path / "s.tsv"
    proc = subprocess.run([sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--n", "2",
                           "-o", str(out)], capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "COMPGEN_DEVICE": "cuda"})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: COMPGEN_DEVICE cuda:0: no CUDA device")
    assert not out.exists()


@pytest.mark.parametrize("options,message", [
    ({"n": 2.9}, "n 2.9: must be an integer"),
    ({"raise_temperature": "no"}, "raise_temperature 'no': must be true or false"),
    ({"temperature": "hot"}, "temperature 'hot': must be a number"),
    ({"n": True}, "n True: must be an integer"),
])
def test_sample_options_of_the_wrong_type_are_refused(options, message):
    with pytest.raises(SettingError, match=message):
        compgen.sample(SHIPPED, **({"n": 3} | options))


@pytest.mark.parametrize("call,message", [
    (lambda t: compgen.geca(t, seed=2**64 + 5), "seed 18446744073709551621: must be an integer"),
    (lambda t: compgen.csl(t, n=2.5), "n 2.5: must be an integer"),
    (lambda t: compgen.load(t, split="training"), "split 'training': unknown"),
    (lambda t: compgen.load(NUMBERS, columns=5), "columns 5: must be str"),
    (lambda t: compgen.perplexity("m.arpa", "jump twice"), "not one string"),
    (lambda t: compgen.perplexity("m.arpa", []), "sentences: empty"),
    (lambda t: compgen.perplexity("m.arpa", [None]), r"sentences\[0\] None: must be text"),
    (lambda t: compgen.kenlm_train("c.txt", "o.arpa", order="5"), "order '5': must be an integer"),
])
def test_python_api_arguments_are_checked(call, message):
    table = compgen.load(NUMBERS)
    with pytest.raises(UserError, match=message):
        call(table)


def test_a_table_that_only_looks_like_an_example_table_is_read_as_records():
    numbers = pl.DataFrame({"x": [[1, 2]], "y": [["a"]], "split": ["train"]})
    with pytest.raises(UserError, match="the x field 'x' holds List\\(Int64\\)"):
        compgen.load(numbers)
    table = compgen.load(NUMBERS)
    assert compgen.load(table) is table


@pytest.mark.parametrize("name,content,place", [
    ("d.tsv", "jump twice\tJUMP JUMP\nwalk <sep> twice\tWALK WALK\n", "d.tsv:2"),
    ("d.jsonl", '{"x": "a", "y": "b"}\n{"x": "c", "y": "<unk> d"}\n', "d.jsonl:2"),
    ("d.csv", "x,y\na,b\nc <pad>,d\n", "d.csv:3"),
    ("d.tsv", "a b\tc\n\nd <copy>\te\n", "d.tsv:3"),
])
def test_a_data_word_spelled_as_a_special_token_is_refused(tmp_path, name, content, place):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UserError, match=f"{place}: the word '<[a-z]+>' is spelled as one of "
                                        "compgen's special tokens"):
        compgen.load(path)


def test_a_special_token_in_a_parquet_file_is_named_by_row(tmp_path):
    path = tmp_path / "train.parquet"
    pl.DataFrame({"x": ["a", "b </s>"], "y": ["c", "d"]}).write_parquet(path)
    with pytest.raises(UserError, match=r"train.parquet \(row 2\): the word '</s>'"):
        compgen.load(path)


@pytest.mark.parametrize("options,message", [
    ({"max_steps": -5}, "max_steps -5: must be an integer >= 0"),
    ({"overrides": {"train.lr": float("nan")}}, "lr nan: must be a positive finite"),
])
def test_training_stops_and_rates_that_would_write_garbage_are_refused(tmp_path, options,
                                                                       message):
    with pytest.raises(UserError, match=message):
        compgen.train_generator(NUMBERS, tmp_path / "g.pt", **options)
    assert not (tmp_path / "g.pt").exists()


@pytest.mark.parametrize("budget", ["nan", "-1", "0"])
def test_a_time_budget_that_never_or_always_stops_is_refused(tmp_path, budget):
    proc = subprocess.run([sys.executable, "-m", "compgen", "train", "generator", "--data",
                           str(NUMBERS), "-o", str(tmp_path / "g.pt"), "--time-budget", budget],
                          capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --time-budget "), lines
