"""Long sampling jobs journal their accepted samples as they come (OUT.partial) and an
interrupted one goes on with --resume to the file the uninterrupted job writes."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compgen.errors import SettingError, UserError
from compgen.sampling.collection import Tally
from compgen.sampling.journal import journal_path
from compgen.sampling.run import sample_export

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"
# temperature sampling without a rare rule: about 7 % of the candidates are kept, so 60
# samples take a few dozen rounds of 32
JOB = {"strategy": "temperature", "temperature": 1.0, "resample": "none", "max_rounds": 0,
       "batch_size": 32, "seed": 3, "threads": 1}
N = 60


class Stop(BaseException):
    """An interruption (as Ctrl-C or SIGTERM are): not an error of the job."""


def stop_after(rounds: int, exc=Stop) -> Tally:
    def on_round(tally):
        if tally.rounds == rounds:
            raise exc("stopped")
    return Tally(on_round=on_round)


def quiet(_line):
    pass


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "samples.tsv"
    sample_export(SHIPPED, n=N, backend="onnx", out=out, log=quiet, **JOB)
    assert not journal_path(out).exists()   # a finished job leaves only its output
    return out.read_bytes()


def interrupted(out: Path, rounds: int = 6, **changes) -> Path:
    with pytest.raises(Stop):
        sample_export(SHIPPED, n=N, backend="onnx", out=out, log=quiet,
                      tally=stop_after(rounds), **{**JOB, **changes})
    assert not out.exists()
    journal = journal_path(out)
    assert journal.read_text().count("#round") == rounds - 1   # the interrupted round is not
    return journal


def test_an_interrupted_job_resumes_to_the_same_file(uninterrupted, tmp_path):
    out = tmp_path / "samples.tsv"
    journal = interrupted(out)
    kept_so_far = [line for line in journal.read_text().splitlines()[1:]
                   if not line.startswith("#")]
    sample_export(SHIPPED, n=N, backend="onnx", out=out, log=quiet, resume=True, **JOB)
    assert out.read_bytes() == uninterrupted
    assert not journal.exists()
    # what the journal held is in the file (the file is the N most probable, so some of
    # the journal's may be ranked out; none is lost before ranking)
    assert kept_so_far


def test_another_backend_goes_on_with_the_same_samples(uninterrupted, tmp_path):
    out = tmp_path / "samples.tsv"
    interrupted(out)
    sample_export(SHIPPED, n=N, backend="torchscript", out=out, log=quiet, resume=True, **JOB)
    got = [line.split("\t") for line in out.read_text().splitlines()]
    want = [line.split("\t") for line in uninterrupted.decode().splitlines()]
    assert [g[:2] for g in got] == [w[:2] for w in want]
    assert all(abs(float(g[2]) - float(w[2])) <= 1e-4 for g, w in zip(got[1:], want[1:]))


def test_a_line_cut_off_mid_write_is_decoded_again(uninterrupted, tmp_path):
    out = tmp_path / "samples.tsv"
    journal = interrupted(out)
    with open(journal, "a", encoding="utf-8") as f:
        f.write("jump twice\tI_JUMP I_JU")          # a write that never ended
    sample_export(SHIPPED, n=N, backend="onnx", out=out, log=quiet, resume=True, **JOB)
    assert out.read_bytes() == uninterrupted


def test_the_journal_of_another_job_is_refused(tmp_path):
    out = tmp_path / "samples.tsv"
    journal = interrupted(out)
    before = journal.read_bytes()
    with pytest.raises(UserError, match="another job"):
        sample_export(SHIPPED, n=N, backend="onnx", out=out, log=quiet, resume=True,
                      **{**JOB, "seed": 4})
    assert journal.read_bytes() == before and not out.exists()


def test_resume_without_a_journal_is_an_error(tmp_path):
    with pytest.raises(SettingError, match="nothing to resume"):
        sample_export(SHIPPED, n=N, backend="onnx", out=tmp_path / "s.tsv", log=quiet,
                      resume=True, **JOB)


def test_a_job_that_fails_leaves_no_journal(tmp_path):
    out = tmp_path / "samples.tsv"
    with pytest.raises(RuntimeError):
        sample_export(SHIPPED, n=N, backend="onnx", out=out, log=quiet,
                      tally=stop_after(3, RuntimeError), **JOB)
    assert list(tmp_path.iterdir()) == []


def compgen(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "compgen", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def test_sigterm_keeps_the_journal_and_resume_finishes_the_job(uninterrupted, tmp_path):
    out = tmp_path / "samples.tsv"
    flags = ["sample", str(SHIPPED), "--n", str(N), "--backend", "onnx", "--strategy",
             "temperature", "-T", "1", "--resample", "none", "--max-rounds", "0",
             "--batch-size", "32", "--seed", "3", "--threads", "1", "-o", str(out)]
    job = compgen(*flags)
    journal = journal_path(out)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (
            not journal.exists() or journal.read_text().count("#round") < 2):
        time.sleep(0.05)
    job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 143, err
    assert "--resume" in err and journal.exists() and not out.exists()
    done = compgen(*flags, "--resume")
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert out.read_bytes() == uninterrupted
    assert sorted(os.listdir(tmp_path)) == ["samples.tsv"]


@pytest.mark.parametrize("extra, says", [
    ([], "--resume: needs -o"),
    (["--backend", "cpp", "-o", "s.tsv"], "--resume: s.tsv.partial does not exist"),
])
def test_resume_where_there_is_no_journal_is_one_error_line(extra, says, tmp_path):
    job = compgen("sample", str(SHIPPED), "--n", "5", "--resume", *extra, cwd=tmp_path)
    _, err = job.communicate(timeout=120)
    assert job.returncode == 2
    assert err.strip().splitlines() == [err.strip()] and err.startswith(f"error: {says}")
    assert list(tmp_path.iterdir()) == []


def test_a_job_stopped_right_after_raising_its_temperature_goes_on_raised(tmp_path):
    """Rounds of one candidate stall often: the journal keeps the raised sampler, so the
    resumed job decodes the next round as the uninterrupted one does."""
    job = {**JOB, "strategy": "greedy", "raise_temperature": True, "batch_size": 1,
           "max_rounds": 200}
    raised, tally = [], Tally()
    full = tmp_path / "full.tsv"
    sample_export(SHIPPED, n=4, backend="onnx", out=full, tally=tally, **job,
                  log=lambda line: raised.append(tally.rounds) if "no new" in line else None)
    assert raised
    out = tmp_path / "samples.tsv"
    with pytest.raises(Stop):
        sample_export(SHIPPED, n=4, backend="onnx", out=out, log=quiet,
                      tally=stop_after(raised[0] + 1), **job)
    assert journal_path(out).read_text().splitlines()[-1].split("\t")[4] == "mixed"
    sample_export(SHIPPED, n=4, backend="onnx", out=out, log=quiet, resume=True, **job)
    assert out.read_bytes() == full.read_bytes()
