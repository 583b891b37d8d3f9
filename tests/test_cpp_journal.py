"""The C++ runner journals its rounds in OUT.partial as the Python backends do: a runner
killed mid-job (or its parent) leaves the journal, and --resume on any backend goes on to
the file the uninterrupted job writes."""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from compgen.errors import Interrupted, UserError
from compgen.runtimes.cpp import build_runner
from compgen.sampling.collection import Tally
from compgen.sampling.journal import MAGIC, journal_path
from compgen.sampling.run import sample_export

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"
# as tests/test_sampling_journal.py: temperature sampling without a rare rule keeps about
# 7 % of the candidates, so 60 samples take a few dozen rounds of 32
JOB = {"strategy": "temperature", "temperature": 1.0, "resample": "none", "max_rounds": 0,
       "batch_size": 32, "seed": 3, "threads": 1}
N = 60
FLAGS = ["--n", str(N), "--strategy", "temperature", "-T", "1", "--resample", "none",
         "--max-rounds", "0", "--batch-size", "32", "--seed", "3", "--threads", "1"]


class Stop(BaseException):
    """An interruption (as Ctrl-C or SIGTERM are): not an error of the job."""


def quiet(_line):
    pass


@pytest.fixture(scope="module")
def runner():
    return build_runner(log=quiet)


@pytest.fixture(scope="module")
def full_run(runner, tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "samples.tsv"
    run = sample_export(SHIPPED, n=N, backend="cpp", out=out, log=quiet, **JOB)
    assert not journal_path(out).exists()   # a finished job leaves only its output
    return out.read_bytes(), run.decoded


@pytest.fixture(scope="module")
def uninterrupted(full_run):
    return full_run[0]


def rows(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines()]


def same_samples(got: str, want: str) -> None:
    """The same pairs in the same order; logprobs as close as two backends' are."""
    got, want = rows(got), rows(want)
    assert [g[:2] for g in got] == [w[:2] for w in want]
    assert all(abs(float(g[2]) - float(w[2])) <= 1e-4 for g, w in zip(got[1:], want[1:]))


def children_named(parent: int, name: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            comm, rest = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:]
            if int(rest.split()[1]) == parent and name.startswith(comm):
                found.append(int(entry.name))
    return found


def rounds_in(journal: Path) -> int:
    try:
        return journal.read_text().count("#round")
    except FileNotFoundError:
        return 0


def kill_runner_after(journal: Path, rounds: int, parent: int) -> threading.Thread:
    """SIGTERM to the runner (not its parent) once the journal holds ``rounds`` rounds."""
    def watch():
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and rounds_in(journal) < rounds:
            time.sleep(0.005)
        for pid in children_named(parent, "compgen-sample"):
            os.kill(pid, signal.SIGTERM)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def interrupted_on_cpp(out: Path) -> Path:
    journal = journal_path(out)
    watcher = kill_runner_after(journal, 2, os.getpid())
    with pytest.raises(Interrupted, match="killed by signal SIGTERM"):
        sample_export(SHIPPED, n=N, backend="cpp", out=out, log=quiet, **JOB)
    watcher.join()
    assert not out.exists() and rounds_in(journal) >= 2
    assert sorted(os.listdir(out.parent)) == [journal.name]   # no staging file
    return journal


def journal_rounds(journal: Path) -> list[tuple[list[list[str]], str]]:
    """(the round's sample lines as fields, its #round line) per complete round."""
    found, pending = [], []
    for line in journal.read_text().splitlines()[1:]:
        if line.startswith("#round"):
            found.append((pending, line))
            pending = []
        else:
            pending.append(line.split("\t"))
    return found


def test_a_runner_killed_mid_job_resumes_to_the_same_file(full_run, tmp_path):
    uninterrupted, decoded = full_run
    out = tmp_path / "cpp" / "samples.tsv"
    out.parent.mkdir()
    journal = interrupted_on_cpp(out)
    assert journal.read_text().startswith(MAGIC + "\t")
    # the lines an onnx run of the same job writes, round for round (its header too)
    onnx = interrupted_on_onnx(tmp_path / "samples.tsv")
    assert onnx.read_text().splitlines()[0] == journal.read_text().splitlines()[0]
    cpp_rounds, onnx_rounds = journal_rounds(journal), journal_rounds(onnx)
    for (got, got_round), (want, want_round) in zip(cpp_rounds, onnx_rounds):
        assert got_round == want_round
        assert [g[:2] for g in got] == [w[:2] for w in want]
        assert all(abs(float(g[2]) - float(w[2])) <= 1e-4 for g, w in zip(got, want))
    assert any(samples for samples, _ in cpp_rounds)
    run = sample_export(SHIPPED, n=N, backend="cpp", out=out, log=quiet, resume=True, **JOB)
    assert out.read_bytes() == uninterrupted
    assert run.decoded == decoded   # went on from the journal's row, none decoded twice
    assert sorted(os.listdir(out.parent)) == ["samples.tsv"]


def test_the_journal_samples_are_taken_as_written(uninterrupted, tmp_path):
    out = tmp_path / "samples.tsv"
    journal = interrupted_on_cpp(out)
    lines = journal.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines[1:], 1) if not line.startswith("#"))
    x, y, _ = lines[at].split("\t")
    lines[at] = f"{x}\t{y}\t-0.000123\n"   # now the most probable of all
    journal.write_text("".join(lines))
    sample_export(SHIPPED, n=N, backend="cpp", out=out, log=quiet, resume=True, **JOB)
    assert out.read_text().splitlines()[1] == f"{x}\t{y}\t-0.000123"


def test_a_cpp_journal_goes_on_on_onnx(uninterrupted, tmp_path):
    out = tmp_path / "samples.tsv"
    interrupted_on_cpp(out)
    sample_export(SHIPPED, n=N, backend="onnx", out=out, log=quiet, resume=True, **JOB)
    same_samples(out.read_text(), uninterrupted.decode())


def interrupted_on_onnx(out: Path, rounds: int = 6) -> Path:
    """An onnx run of the job stopped in round ``rounds``."""
    def on_round(tally):
        if tally.rounds == rounds:
            raise Stop("stopped")
    with pytest.raises(Stop):
        sample_export(SHIPPED, n=N, backend="onnx", out=out, log=quiet,
                      tally=Tally(on_round=on_round), **JOB)
    assert rounds_in(journal_path(out)) == rounds - 1
    return journal_path(out)


def test_an_onnx_journal_goes_on_on_cpp(uninterrupted, tmp_path):
    out = tmp_path / "samples.tsv"
    journal = interrupted_on_onnx(out)
    lines = journal.read_text().splitlines()
    sample_export(SHIPPED, n=N, backend="cpp", out=out, log=quiet, resume=True, **JOB)
    same_samples(out.read_text(), uninterrupted.decode())
    assert not journal.exists()
    assert len(lines) > 6   # samples were accepted before the interruption


def test_a_cut_off_round_is_decoded_again_by_the_runner(uninterrupted, tmp_path):
    out = tmp_path / "samples.tsv"
    journal = interrupted_on_cpp(out)
    with open(journal, "a", encoding="utf-8") as f:
        f.write("jump twice\tI_JUMP I_JUMP\t-1.5\njump thrice\tI_JU")   # a round never ended
    sample_export(SHIPPED, n=N, backend="cpp", out=out, log=quiet, resume=True, **JOB)
    assert out.read_bytes() == uninterrupted


def test_a_sample_the_filter_rejects_is_refused(runner, tmp_path):
    out = tmp_path / "samples.tsv"
    journal = interrupted_on_onnx(out, rounds=3)
    text = journal.read_text().splitlines(keepends=True)
    sample = next(line for line in text[1:] if not line.startswith("#"))
    journal.write_text(text[0] + sample + sample + "".join(text[1:]))   # a duplicate
    with pytest.raises(UserError, match="filter does not accept"):
        sample_export(SHIPPED, n=N, backend="cpp", out=out, log=quiet, resume=True, **JOB)
    assert list(tmp_path.iterdir()) == []   # an error a rerun meets again: the journal goes


def compgen(*args, **kwargs):
    return subprocess.Popen([sys.executable, "-m", "compgen", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def test_another_jobs_journal_is_refused_on_cpp_with_one_line(runner, tmp_path):
    out = tmp_path / "samples.tsv"
    journal = interrupted_on_onnx(out, rounds=3)
    before = journal.read_bytes()
    flags = [f if f != "3" else "4" for f in FLAGS]   # another seed: another job
    job = compgen("sample", str(SHIPPED), *flags, "--backend", "cpp", "-o", str(out),
                  "--resume")
    _, err = job.communicate(timeout=300)
    assert job.returncode == 2
    assert len(err.strip().splitlines()) == 1 and "another job" in err, err
    assert journal.read_bytes() == before and not out.exists()


def test_sigterm_to_compgen_keeps_the_journal_and_leaves_no_runner(uninterrupted, tmp_path):
    out = tmp_path / "samples.tsv"
    flags = ["sample", str(SHIPPED), *FLAGS, "--backend", "cpp", "-o", str(out)]
    job = compgen(*flags)
    journal = journal_path(out)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and rounds_in(journal) < 2:
        time.sleep(0.005)
    runners = children_named(job.pid, "compgen-sample")
    assert runners
    job.send_signal(signal.SIGTERM)
    _, err = job.communicate(timeout=60)
    assert job.returncode == 143, err
    assert "--resume" in err and journal.exists() and not out.exists()
    assert sorted(os.listdir(tmp_path)) == [journal.name]
    assert not any(Path(f"/proc/{pid}").exists() for pid in runners)
    done = compgen(*flags, "--resume")
    _, err = done.communicate(timeout=300)
    assert done.returncode == 0, err
    assert out.read_bytes() == uninterrupted
    assert sorted(os.listdir(tmp_path)) == ["samples.tsv"]


def test_the_runner_reports_every_round_as_it_goes(runner, full_run, tmp_path):
    """The progress bar's figures come from the runner after every round, while it runs
    (the journal of that round is already on disk when its figures arrive)."""
    out = tmp_path / "s.tsv"
    seen = []

    def on_round(tally):
        seen.append((tally.rounds, tally.decoded, tally.accepted,
                     journal_path(out).read_text().count("\n#round")))

    tally = Tally(on_round=on_round)
    run = sample_export(SHIPPED, n=N, backend="cpp", out=out, log=quiet, tally=tally, **JOB)
    assert [r for r, *_ in seen] == list(range(1, len(seen) + 1))
    assert [d for _, d, *_ in seen] == [32 * r for r, *_ in seen]
    assert [j for *_, j in seen] == [r for r, *_ in seen]
    accepted = [a for _, _, a, _ in seen]
    assert accepted == sorted(accepted) and accepted[-1] >= tally.wanted > accepted[-2]
    assert seen[-1][1] == run.decoded == full_run[1]
