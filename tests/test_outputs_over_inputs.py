"""No command destroys its input: an output path that is also an input (by any name, a
link or a hard link), or that lies inside an input export folder or a named data set's
folder, is one ``error:`` line and exit 2 before any work, and the input is intact."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from compgen.errors import UserError
from compgen.io import refuse_overwriting_inputs

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"
PAIRS = "jump\tJUMP\nwalk\tWALK\njump twice\tJUMP JUMP\nwalk twice\tWALK WALK\n"


def compgen(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "compgen", *args], capture_output=True,
                          text=True, cwd=cwd, check=False, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def assert_refused(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    for word in words:
        assert word in lines[0], lines


@pytest.fixture
def files(tmp_path):
    (tmp_path / "d.tsv").write_text(PAIRS, encoding="utf-8")
    (tmp_path / "c.txt").write_text("a b c\nb c d\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("command", [
    ["augment", "geca", "{d}", "-o", "{d}"],
    ["augment", "geca", "{d}", "-o", "{link}"],          # another name for the same file
    ["lm", "train", "{c}", "-o", "{c}"],
    ["train", "predictor", "--data", "{d}", "--augment", "{c}", "-o", "{c}"],
    ["sample", str(SHIPPED), "--n", "2", "--lm", "{c}", "-o", "{c}"],
    ["sample", str(SHIPPED), "--n", "2", "--lm", "{c},{d}", "-o", "{hard}"],   # a hard link
    ["augment", "stem-corrupt", "{d}", "-o", "{d}"],
])
def test_an_output_that_is_an_input_is_refused(files, command):
    (files / "link.tsv").symlink_to(files / "d.tsv")
    os.link(files / "d.tsv", files / "hard.tsv")
    names = {"d": files / "d.tsv", "c": files / "c.txt", "link": files / "link.tsv",
             "hard": files / "hard.tsv"}
    proc = compgen(*[part.format(**names) for part in command])
    assert_refused(proc, "is also an input")
    assert (files / "d.tsv").read_text(encoding="utf-8") == PAIRS
    assert (files / "c.txt").read_text(encoding="utf-8") == "a b c\nb c d\n"


@pytest.mark.parametrize("name", ["train.tsv", "new.tsv", "sub/samples.tsv"])
def test_a_sample_file_inside_the_export_folder_is_refused(tmp_path, name):
    folder = tmp_path / "export"
    shutil.copytree(SHIPPED, folder)
    before = sorted(p.relative_to(folder) for p in folder.rglob("*"))
    proc = compgen("sample", str(folder), "--n", "2", "-o", str(folder / name))
    assert_refused(proc, "inside the export folder", str(folder))
    assert sorted(p.relative_to(folder) for p in folder.rglob("*")) == before


def test_exporting_a_folder_over_itself_is_refused(tmp_path):
    folder = tmp_path / "export"
    shutil.copytree(SHIPPED, folder)
    assert_refused(compgen("export", str(folder), "-o", str(folder)), "is also an input")
    assert (folder / "model.ts").read_bytes() == (SHIPPED / "model.ts").read_bytes()


def test_an_output_inside_a_named_data_sets_folder_is_refused(tmp_path):
    data = tmp_path / "data"
    (data / "scan").mkdir(parents=True)
    proc = compgen("augment", "geca", "scan/jump", "--data-dir", str(data),
                   "-o", str(data / "scan" / "aug.tsv"))
    assert_refused(proc, "inside the data folder")


def test_the_library_check_names_the_input(tmp_path):
    source = tmp_path / "in.tsv"
    source.write_text(PAIRS, encoding="utf-8")
    (tmp_path / "again.tsv").symlink_to(source)
    with pytest.raises(UserError, match="is also an input \\(data "):
        refuse_overwriting_inputs(tmp_path / "again.tsv", [("data", source)])
    with pytest.raises(UserError, match="is also an input"):   # not yet written: same path
        refuse_overwriting_inputs(tmp_path / "." / "in.tsv", [("data", source)])
    refuse_overwriting_inputs(tmp_path / "out.tsv", [("data", source), ("gone", tmp_path / "x")])


def test_the_python_api_refuses_too(tmp_path):
    from compgen.augment.geca import augment_file, make_config

    source = tmp_path / "d.tsv"
    source.write_text(PAIRS, encoding="utf-8")
    with pytest.raises(UserError, match="output .*d.tsv: is also an input"):
        augment_file(str(source), source, make_config("generic", {}))
    assert source.read_text(encoding="utf-8") == PAIRS
