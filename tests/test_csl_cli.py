"""`compgen augment csl` and `compgen evaluate-grammar` end to end; the SCAN interpreter
that judges samples."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from compgen.augment.csl.rules import read_grammar
from compgen.data.scan_semantics import interpret
from compgen.io import read_samples_tsv

COMPGEN = [sys.executable, "-m", "compgen"]


def run_cli(*args):
    return subprocess.run(COMPGEN + [str(a) for a in args], capture_output=True, text=True, check=False,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)


def one_error_line(result, *fragments):
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_augment_and_evaluate_grammar(small_scan: Path, tmp_path: Path):
    out, gram = tmp_path / "synth.tsv", tmp_path / "g.txt"
    result = run_cli("augment", "csl", "scan/jump", "--config", "scan", "-o", out, "--n", 300,
                     "--grammar-out", gram, "--steps", 10, "--threads", 1, "--data-dir", small_scan)
    assert result.returncode == 0, result.stderr
    counts = re.findall(r"(\d+)/(\d+)", result.stderr)   # the bars, as drawn last
    assert counts and all(done == total for done, total in counts), result.stderr
    for text in ("rules", "train derivable", "test derivable", "induce", "fit", "sample", "peak RSS MB"):
        assert text in result.stdout
    rules = read_grammar(gram)
    assert "NT_1 twice ### NT_1 NT_1" in {str(r) for r in rules}
    samples = read_samples_tsv(out)
    assert len(samples) == 300
    assert not list(tmp_path.glob(".*.tmp"))
    # reuse the grammar, uniform sampling: no induction, no model
    again = run_cli("augment", "csl", "scan/jump", "-o", tmp_path / "u.tsv", "--n", 50, "--grammar", gram,
                    "--uniform", "--data-dir", small_scan)
    assert again.returncode == 0, again.stderr
    assert "read grammar" in again.stdout and "induce" not in again.stdout
    assert len(read_samples_tsv(tmp_path / "u.tsv")) == 50
    evaluated = run_cli("evaluate-grammar", gram, "--data", "scan/jump", "--steps", 10, "--threads", 1,
                        "--data-dir", small_scan)
    assert evaluated.returncode == 0, evaluated.stderr
    assert "parser exact match (test)" in evaluated.stdout


def test_progress_bars_end_at_their_totals():
    from compgen.cli.csl_report import csl_progress

    with csl_progress() as progress:
        progress("forests", 1000, 1234)     # the loops report every few hundred items
        progress("fit", 5, 10)
        bars = progress.bars
        assert [t.completed for t in bars.tasks] == [1234, 5]   # a phase ends when the next starts
    assert [t.completed for t in bars.tasks] == [1234, 10]


def test_bad_input_is_one_error_line(tmp_path: Path, small_scan: Path):
    bad = tmp_path / "bad.txt"
    bad.write_text("walk ### I_WALK\nNT_1 twice => NT_1 NT_1\n")
    one_error_line(run_cli("augment", "csl", "scan/jump", "-o", tmp_path / "o.tsv", "--grammar", bad,
                           "--data-dir", small_scan), f"{bad}:2:")
    bad.write_text("NT_1 and NT_2 ### NT_1\n")
    one_error_line(run_cli("evaluate-grammar", bad, "--data", "scan/jump", "--data-dir", small_scan),
                   f"{bad}:1:", "unbalanced")
    bad.write_text("NT_3 twice ### NT_3 NT_3\n")
    one_error_line(run_cli("evaluate-grammar", bad, "--data", "scan/jump", "--data-dir", small_scan),
                   f"{bad}:1:")
    one_error_line(run_cli("augment", "csl", "scan/jump", "-o", tmp_path / "o.tsv", "--n", -1), "--n")
    one_error_line(run_cli("augment", "csl", "scan/jump", "-o", tmp_path / "o.tsv", "--temperature", 0,
                           "--data-dir", small_scan), "--temperature")
    one_error_line(run_cli("augment", "csl", "scan/jump", "-o", tmp_path / "o.tsv", "--config", "nope",
                           "--data-dir", small_scan), "config")
    good = tmp_path / "good.txt"
    good.write_text("walk ### I_WALK\n")
    one_error_line(run_cli("augment", "csl", "scan/jump", "-o", tmp_path / "o.tsv", "--grammar", good,
                           "--refine", "--data-dir", small_scan), "--refine", "--grammar")
    assert not (tmp_path / "o.tsv").exists()


@pytest.mark.parametrize("command, actions", [
    ("walk", "I_WALK"),
    ("turn around left", "I_TURN_LEFT I_TURN_LEFT I_TURN_LEFT I_TURN_LEFT"),
    ("jump opposite right twice after look", "I_LOOK I_TURN_RIGHT I_TURN_RIGHT I_JUMP I_TURN_RIGHT I_TURN_RIGHT I_JUMP"),
    ("walk twice left", "I_TURN_LEFT I_WALK I_WALK"),      # outside SCAN: postfix, left to right
    ("walk and run and look", "I_WALK I_RUN I_LOOK"),
])
def test_interpreter(command, actions):
    assert interpret(command.split()) == actions.split()


@pytest.mark.parametrize("command", ["turn", "turn twice", "walk left and", "twice", "walk around", "dax"])
def test_interpreter_rejects_non_commands(command):
    assert interpret(command.split()) is None


def test_interpreter_agrees_with_every_scan_command(data_dir: Path):
    from compgen.data.scan import load_scan_grammar

    grammar = load_scan_grammar(data_dir)
    assert len(grammar) > 20000
    assert all(interpret(x) == list(y) for x, y in grammar.items())
