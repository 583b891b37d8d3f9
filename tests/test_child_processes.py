"""Child processes die with compgen and obey only their structured job: SIGTERM to
``compgen sample --backend cpp`` leaves no runner behind and no output written later; a
newline in -o cannot add lines to the runner's job; lmplz's real error is the one shown."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compgen.runtimes.cpp import build_runner, job_record

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z"


def test_a_job_record_holds_a_newline_as_data():
    assert job_record("out", "w/s.tsv\nn 2") == "out 11\nw/s.tsv\nn 2\n"
    assert job_record("ids", [1, 2]) == "ids 3\n1 2\n"


def test_a_newline_in_the_output_path_is_a_file_name_not_a_job_line(tmp_path):
    build_runner(log=lambda m: None)
    out = tmp_path / "w" / "s.tsv\nn 2"
    result = subprocess.run(
        [sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--backend", "cpp", "--n", "5",
         "--nsamples", "5", "--batch-size", "8", "--threads", "1", "-o", str(out)],
        capture_output=True, text=True, cwd=ROOT, env=ENV, check=False)
    assert result.returncode == 0, result.stderr
    rows = [line for line in out.read_text().splitlines() if line and not line.startswith("#")]
    assert len(rows) == 5   # not the 2 that the injected "n 2" would ask for
    assert sorted(p.name for p in out.parent.iterdir()) == [out.name]


def start_long_cpp_job(out):
    """A `compgen sample --backend cpp` job that runs for minutes (every stored tuple), and
    its runner process once it has started (None if it never did)."""
    build_runner(log=lambda m: None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--backend", "cpp", "--n", "4000",
         "--nsamples", "4000", "--batch-size", "64", "--max-rounds", "1000", "--threads", "1",
         "--all-prototypes", "-o", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
    runner = None
    deadline = time.monotonic() + 240
    while runner is None and time.monotonic() < deadline and proc.poll() is None:
        runner = next(iter(children_of(proc.pid)), None)
        time.sleep(0.2)
    return proc, runner


def test_sigterm_kills_the_runner_and_nothing_is_written_after(tmp_path):
    out = tmp_path / "s.tsv"
    proc, runner = start_long_cpp_job(out)
    if runner is None:
        proc.kill()
        pytest.fail("the runner did not start: " + proc.communicate()[1].decode()[-500:])
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    time.sleep(1.0)
    assert not alive(runner)
    time.sleep(2.0)
    assert not out.exists()
    # no staging file either; the journal stays for --resume (tests/test_cpp_journal.py)
    assert [p.name for p in tmp_path.iterdir()] == ["s.tsv.partial"]


def test_a_runner_whose_parent_is_killed_dies_too(tmp_path):
    """SIGKILL leaves no handler to run: the runner dies by its parent-death signal."""
    out = tmp_path / "s.tsv"
    proc, runner = start_long_cpp_job(out)
    assert runner is not None
    time.sleep(1.0)
    proc.kill()
    proc.wait()
    for _ in range(50):
        if not alive(runner):
            break
        time.sleep(0.1)
    assert not alive(runner)
    time.sleep(2.0)
    assert not out.exists()
