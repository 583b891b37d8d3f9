"""Inputs that once gave tracebacks are one error line naming the file: JSON nested past
the parser's depth, a data file linked to itself, a Hugging Face folder whose splits are
null, a sample journal that is not UTF-8 or is a folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

import compgen
from compgen.errors import UserError
from compgen.sampling.journal import Journal

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"


@pytest.mark.parametrize("name,content,message", [
    ("d.jsonl", '{"x": ' + "[" * 100_000 + "}\n", "d.jsonl:1: JSON nested too deeply"),
    ("d.json", "[" * 100_000, "d.json: JSON nested too deeply"),
])
def test_deeply_nested_json_is_one_error(tmp_path, name, content, message):
    (tmp_path / name).write_text(content)
    with pytest.raises(UserError, match=message):
        compgen.load(tmp_path / name)


def test_a_data_file_linked_to_itself_is_one_error(tmp_path):
    (tmp_path / "train.tsv").symlink_to(tmp_path / "train.tsv")
    with pytest.raises(UserError, match="train.tsv: cannot read"):
        compgen.load(tmp_path)


@pytest.mark.parametrize("splits", ["null", "3", '[1, 2]'])
def test_a_dataset_dict_without_a_split_list_is_one_error(tmp_path, splits):
    (tmp_path / "dataset_dict.json").write_text(f'{{"splits": {splits}}}')
    with pytest.raises(UserError, match='dataset_dict.json: expected {"splits": \\[...\\]}'):
        compgen.load(tmp_path)


def test_a_journal_that_is_not_utf8_or_a_folder_is_one_error(tmp_path):
    (tmp_path / "s.tsv.partial").write_bytes("caf\u00e9\n".encode("latin-1"))
    with pytest.raises(UserError, match="not a compgen sample journal \\(not UTF-8"):
        Journal(tmp_path / "s.tsv", "key", resume=True)
    (tmp_path / "t.tsv.partial").mkdir()
    with pytest.raises(UserError, match="t.tsv.partial: a folder where the job keeps"):
        Journal(tmp_path / "t.tsv", "key")


def test_the_command_line_says_it_in_one_line(tmp_path):
    (tmp_path / "s.tsv.partial").mkdir()
    proc = subprocess.run([sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--n", "2",
                           "-o", str(tmp_path / "s.tsv")], capture_output=True, text=True,
                          cwd=ROOT, check=False, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert not (tmp_path / "s.tsv").exists()


def test_a_fifo_in_a_data_folder_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "train.tsv")
    with pytest.raises(UserError, match="train.tsv: not a regular file"):
        compgen.load(tmp_path)


def test_a_device_is_not_read_as_a_file():
    from compgen.errors import read_text

    with pytest.raises(UserError, match="/dev/zero: a device, not a file"):
        read_text("/dev/zero")


@pytest.mark.parametrize("backend", ["onnx", "cpp"])
def test_a_million_threads_is_refused_before_any_work(tmp_path, backend):
    proc = subprocess.run([sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--n", "2",
                           "--backend", backend, "--threads", "1000000", "-o",
                           str(tmp_path / "s.tsv")], capture_output=True, text=True, cwd=ROOT,
                          check=False, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --threads 1000000: must be from 1 to")
    with pytest.raises(UserError, match="threads 1000000: must be from 1 to"):
        compgen.sample(SHIPPED, n=2, threads=1_000_000)
