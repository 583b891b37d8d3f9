"""A model written by ``compgen lm train`` carries a digest record (``MODEL.sha256``): one
flipped bit in the model is one error line when it is loaded (perplexity, sampling with
``--lm``), and what KenLM and the C++ runner load is the checked private copy. Temporary
folders of ``lm train`` (lmplz's) and of GECA's spill carry the process id: a killed run's
are swept by the next run, a live run's are kept."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cli_subprocess import compgen, one_error_line

from compgen.augment.geca.partitions import SPILL_PREFIX, spill_folder
from compgen.errors import UserError
from compgen.io import process_temp_folder
from compgen.lm import model_file
from compgen.lm.kenlm_tools import LMPLZ_PREFIX, train_lm
from compgen.lm.rerank import LmRanking
from compgen.lm.scores import load_model, score_corpus

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"


@pytest.fixture(scope="module")
def trained(tmp_path_factory, data_dir):
    """A 3-gram ARPA and binary model of 200 kin lines, as `lm train` writes them."""
    folder = tmp_path_factory.mktemp("lm_record")
    corpus = folder / "kin200.txt"
    lines = (data_dir / "lm" / "kin" / "train.txt").read_text(encoding="utf-8").splitlines()[:200]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    models = {suffix: train_lm(corpus, folder / f"m.{suffix}", order=3, discount_fallback=True)
              for suffix in ("arpa", "bin")}
    return corpus, models


def flipped(model: Path, folder: Path) -> Path:
    """A copy of ``model`` and its record with one bit flipped: in a binary, a byte in the
    middle; in an ARPA file, a digit of a probability (still a valid ARPA file)."""
    data = bytearray(model.read_bytes())
    at = len(data) // 2
    if model.suffix == ".arpa":
        at = next(i for i in range(at, len(data)) if chr(data[i]).isdigit())
    data[at] ^= 1
    copy = folder / f"flipped{model.suffix}"
    copy.write_bytes(bytes(data))
    model_file.record_path(copy).write_bytes(model_file.record_path(model).read_bytes())
    return copy


def test_train_writes_the_digest_record_of_its_output(trained):
    _, models = trained
    for model in models.values():
        record = json.loads(model_file.record_path(model).read_text())
        assert record["sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
        assert record["written_by"] == "compgen lm train"


@pytest.mark.parametrize("suffix", ["arpa", "bin"])
def test_a_flipped_bit_is_refused_by_perplexity_and_sampling(trained, tmp_path, suffix):
    corpus, models = trained
    bad = flipped(models[suffix], tmp_path)
    # the flip alone goes unnoticed by KenLM: it loads and scores, with other numbers
    unchecked = tmp_path / f"unrecorded.{suffix}"
    unchecked.write_bytes(bad.read_bytes())
    assert load_model(unchecked) is not None
    one_error_line(compgen("lm", "eval", "--base", bad, "--val", corpus, "--test", corpus),
                   str(bad), "does not match its digest record")
    out = tmp_path / "s.tsv"
    one_error_line(compgen("sample", SHIPPED, "--n", "2", "--lm", bad, "-o", out),
                   str(bad), "does not match its digest record")
    assert not out.exists()
    with pytest.raises(UserError, match="does not match its digest record"):
        LmRanking.from_options(f"{models[suffix]},{bad}", weight=0.5)


def test_recorded_and_unrecorded_models_score_the_same(trained, tmp_path):
    corpus, models = trained
    sentences = corpus.read_text(encoding="utf-8").splitlines()[:20]
    plain = tmp_path / "own.bin"   # a user's own model: no record, accepted as it is
    plain.write_bytes(models["bin"].read_bytes())
    checked = score_corpus(load_model(models["bin"]), sentences).sentence_log10
    own = score_corpus(load_model(plain), sentences).sentence_log10
    assert checked.tolist() == own.tolist()


def test_the_runner_is_handed_the_checked_copy(trained):
    _, models = trained
    job = LmRanking.from_options(str(models["bin"]), rerank="lm").runner_job()
    handed = Path(job["lm_base"])
    assert handed != models["bin"].resolve()
    record = json.loads(model_file.record_path(models["bin"]).read_text())
    assert hashlib.sha256(handed.read_bytes()).hexdigest() == record["sha256"]
    # in this process's private folder: a model edited after the check is not what it gets
    assert str(os.getpid()) in handed.parent.name


def test_an_unreadable_record_is_refused(trained, tmp_path):
    _, models = trained
    model = tmp_path / "m.arpa"
    model.write_bytes(models["arpa"].read_bytes())
    model_file.record_path(model).write_text("not json")
    with pytest.raises(UserError, match="unreadable"):
        load_model(model)


# ---------------------------------------------------------------- temp folders of dead runs

def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture
def live_pid():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("prefix", [LMPLZ_PREFIX, SPILL_PREFIX])
def test_a_dead_runs_folder_is_swept_and_a_live_ones_kept(tmp_path, live_pid, prefix):
    dead = tmp_path / f"{prefix}{dead_pid()}-abc"
    live = tmp_path / f"{prefix}{live_pid}-abc"
    for folder in (dead, live):
        folder.mkdir()
        (folder / "sort.tmp").write_bytes(b"x" * 100)
    unnamed = tmp_path / f"{prefix}abc"   # no process id: whose it is cannot be told
    unnamed.mkdir()
    made = process_temp_folder(prefix, tmp_path)
    assert not dead.exists() and live.is_dir() and unnamed.is_dir()
    assert made.name.startswith(f"{prefix}{os.getpid()}-")


def test_lm_train_sweeps_a_killed_trains_lmplz_folder(trained, tmp_path, monkeypatch):
    corpus, _ = trained
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    left = tmp_path / f"{LMPLZ_PREFIX}{dead_pid()}-xyz"
    left.mkdir()
    train_lm(corpus, tmp_path / "m.arpa", order=2, discount_fallback=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.arpa", "m.arpa.sha256"]


def test_a_spill_killed_by_sigkill_is_swept_by_the_next(tmp_path):
    code = ("import os, signal\nfrom compgen.augment.geca.partitions import spill_folder\n"
            f"with spill_folder({str(tmp_path)!r}) as folder:\n"
            "    (folder / 'part-0.parquet').write_bytes(b'x')\n"
            "    os.kill(os.getpid(), signal.SIGKILL)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == -signal.SIGKILL
    assert len(list(tmp_path.glob(f"{SPILL_PREFIX}*"))) == 1
    with spill_folder(tmp_path) as folder:
        assert [p.name for p in tmp_path.iterdir()] == [folder.name]
    assert list(tmp_path.iterdir()) == []


def test_a_record_that_would_overwrite_the_corpus_is_refused(tmp_path):
    corpus = tmp_path / "c.txt.sha256"
    corpus.write_text("a b c\nb c d\n")
    one_error_line(compgen("lm", "train", corpus, "-o", tmp_path / "c.txt", "--discount_fallback"),
                   "digest record", "is also an input")
    assert corpus.read_text() == "a b c\nb c d\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.txt.sha256"]
