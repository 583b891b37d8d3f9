"""Bad input of any kind: one ``error: FILE[:LINE]: ...`` line on stderr and exit status 2,
never a traceback. The CLI runs in-process (as ``compgen`` would), so each case is cheap."""

import os
import sys

import pytest

from compgen.cli import main

BINARY = bytes(range(256)) * 20          # NUL bytes and invalid UTF-8
LATIN1 = "caf\u00e9 jump\n".encode("latin-1")  # text, but not UTF-8


def run(capsys, monkeypatch, *args) -> tuple[int, list[str]]:
    """(exit status, stderr lines) of ``compgen ARGS``."""
    monkeypatch.setattr(sys, "argv", ["compgen", *map(str, args)])
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as stop:
        main()
    err = capsys.readouterr().err
    return stop.value.code, [line for line in err.splitlines() if line.strip()]


def assert_one_error(result, *fragments):
    code, lines = result
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, lines)
    for fragment in fragments:
        assert str(fragment) in lines[0], lines[0]


@pytest.mark.parametrize("content", [BINARY, LATIN1], ids=["binary", "latin1"])
@pytest.mark.parametrize("command", [
    ["data", "stats", "{f}"],
    ["augment", "geca", "{f}", "-o", "{out}"],
    ["lm", "train", "{f}", "-o", "{out}.arpa", "--discount_fallback"],
    ["train", "predictor", "--data", "scan/jump", "--augment", "{f}", "-o", "{out}.pt"],
], ids=["stats", "geca", "lm-train", "train-augment"])
def test_text_readers_refuse_binary_input(tmp_path, capsys, monkeypatch, content, command):
    bad = tmp_path / "g.bin"
    bad.write_bytes(b"IN: jump OUT: I_JUMP\n" + content)
    args = [a.format(f=bad, out=tmp_path / "out") for a in command]
    assert_one_error(run(capsys, monkeypatch, *args), f"{bad}:2:")
    assert sorted(os.listdir(tmp_path)) == ["g.bin"]


def test_samples_tsv_rows_must_have_the_same_width(tmp_path, capsys, monkeypatch):
    ragged = tmp_path / "s.txt"
    ragged.write_text("a\tb\nc\td\tV;PST\n")
    assert_one_error(run(capsys, monkeypatch, "data", "stats", ragged), f"{ragged}:2:",
                     "3 tab-separated fields, expected 2")


def test_samples_tsv_score_columns_are_numbers(tmp_path, capsys, monkeypatch):
    scored = tmp_path / "s.tsv"
    scored.write_text("#x\ty\tlogprob\njump twice\tI_JUMP I_JUMP\t-1.5\nwalk\tI_WALK\tlow\n")
    assert_one_error(run(capsys, monkeypatch, "data", "stats", scored), f"{scored}:3:",
                     "not a number")


def test_a_samples_tsv_with_scores_is_not_read_as_sigmorphon(tmp_path):
    from compgen.data import read_data_file

    scored = tmp_path / "s.txt"
    scored.write_text("#x\ty\tlogprob\njump twice\tI_JUMP I_JUMP\t-1.5\n")
    table = read_data_file(scored)
    assert table["x"].to_list() == [["jump", "twice"]] and table["y"].to_list() == [["I_JUMP", "I_JUMP"]]
