"""``compgen ARGS`` run in-process as the program runs (exit status, error lines, output),
and the one-error-line check the bad-input tests share."""

import sys

import pytest

from compgen.cli import main


def run(capsys, monkeypatch, *args) -> tuple[int, list[str], str]:
    """(exit status, stderr lines, stdout) of ``compgen ARGS`` run in-process."""
    monkeypatch.setattr(sys, "argv", ["compgen", *map(str, args)])
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as stop:
        main()
    out, err = capsys.readouterr()
    return stop.value.code, [line for line in err.splitlines() if line.strip()], out


def assert_one_error(result, *fragments):
    code, lines, _ = result
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, lines)
    for fragment in fragments:
        assert str(fragment) in lines[0], lines[0]
