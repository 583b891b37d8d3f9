"""The README's command blocks, as written: every `compgen` line parses against the CLI,
every file a line reads was written by an earlier line, and no line overwrites a file an
earlier line wrote (except --resume, which continues it). With COMPGEN_README_RUN=1 the
blocks also run, in order, in a temporary folder, shortened by appended options only."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from compgen.cli import app

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FILE_SUFFIXES = (".pt", ".tsv", ".bin", ".arpa", ".txt", ".csv")
# options that only shorten a run (appended; the last value of an option wins), and
# --raise-temperature for sample: a generator stopped after 200 updates seldom writes the
# rare word under beam search, so the shortened run may raise its temperature
SHORTER = {
    "train generator": ["--max-steps", "200", "--quiet", "--threads", "1"],
    "train predictor": ["--epochs", "1", "--threads", "1"],
    "sample": ["--n", "20", "--max-rounds", "50", "--threads", "1", "--raise-temperature"],
    "export": ["--parity-sets", "16"],
    "pipeline": ["--seeds", "0", "--generator-steps", "20", "--predictor-epochs", "1",
                 "--n", "20", "--threads", "1", "--root", "runs/pipeline"],
}


def bash_lines(section: str | None = None) -> list[str]:
    """Command lines of the README's bash blocks (of the ``## section`` only, if given),
    comments and blank lines dropped."""
    lines, inside, fenced, heading = [], False, False, None
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```bash" and not fenced
            fenced = not fenced
            continue
        if not fenced and line.startswith("#"):
            heading = line.lstrip("#").strip()
        if inside and (section is None or heading == section):
            code = line.split(" #", 1)[0].strip()
            if code and not code.startswith("#"):
                lines.append(code)
    return lines


def commands(section: str | None = None) -> list[list[str]]:
    """Every shell command of the blocks (split on && and ;), as words."""
    out = []
    for line in bash_lines(section):
        for part in re.split(r"\s*(?:&&|;)\s*", line):
            if part:
                out.append(shlex.split(part))
    return out


def leaf(words: list[str]):
    """(command path, click command, its arguments) of `compgen ...` words."""
    group, path = typer.main.get_command(app), []
    rest = words[1:]
    while hasattr(group, "commands") and rest and rest[0] in group.commands:
        group = group.commands[rest[0]]
        path.append(rest.pop(0))
    return " ".join(path), group, rest


def compgen_lines():
    for words in commands():
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]   # VAR=value prefixes
        if words and words[0] == "compgen" and "..." not in words:
            yield words


def files_read_and_written(path: str, command, args: list[str]) -> tuple[list[str], list[str]]:
    ctx = command.make_context(path, list(args))
    params = ctx.params
    reads = []
    for name in ("checkpoint", "models", "model", "path", "augment", "base", "aug", "input",
                 "corpus", "grammar"):
        value = params.get(name)
        for v in value if isinstance(value, list | tuple) else [value]:
            if v is not None and (str(v).endswith(FILE_SUFFIXES) or str(v).startswith("exported/")):
                reads.append(str(v))
    written = [str(params[name]) for name in ("output", "grammar_out") if params.get(name)]
    if path == "export" and not params.get("output"):
        written = [f"exported/{Path(str(params['checkpoint'])).stem}"]
    return reads, written


def test_every_readme_command_parses_and_reads_what_an_earlier_line_wrote():
    assert len(list(compgen_lines())) > 20
    written: dict[str, str] = {}
    for words in commands():
        if ">" in words:   # a shell redirection writes a file too (cut -f1 x.tsv > inputs.txt)
            written.setdefault(words[words.index(">") + 1], " ".join(words))
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]
        if not words or words[0] != "compgen" or "..." in words:
            continue
        path, command, args = leaf(words)
        assert not hasattr(command, "commands"), f"not a command: {' '.join(words)}"
        if "--list" in args or "--help" in args:
            continue
        reads, outputs = files_read_and_written(path, command, args)
        for name in reads:
            assert name in written or (ROOT / name).is_file(), (
                f"'{' '.join(words)}' reads {name}, which no earlier line writes")
        for name in outputs:
            assert name not in written or "--resume" in args, (
                f"'{' '.join(words)}' overwrites {name}, written by '{written[name]}'")
            written[name] = " ".join(words)


def run_blocks(tmp_path: Path, data_dir, section: str | None = None) -> None:
    """Run the README's commands in order in ``tmp_path`` (which sees the repository's
    tests/ folder, where the shipped data sets are), shortened by SHORTER."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "COMPGEN_DATA": str(data_dir)}
    for words in commands(section):
        if "..." in words or words[0] in ("make",) or words[0].startswith(("SEEDS=", ".venv")):
            continue   # set-up, placeholders, scripts with their own wrappers
        if words[0] == "compgen":
            path, _, _ = leaf(words)
            if path == "data fetch":
                continue   # downloads; the data folder is given
            shorter = SHORTER.get(path, []) + (["--limit", "20"] if "--direct" in words else [])
            words = [sys.executable, "-m", "compgen", *words[1:], *shorter]
        elif ">" in words:
            i = words.index(">")
            with open(tmp_path / words[i + 1], "w") as out:
                subprocess.run(words[:i], cwd=tmp_path, stdout=out, check=True)
            continue
        proc = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 0, f"{' '.join(words)}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"


# runs every README command (35 min on 2 shared cores): deselected unless COMPGEN_README_RUN=1
@pytest.mark.readme_run
def test_readme_blocks_run_in_order(tmp_path, data_dir):
    run_blocks(tmp_path, data_dir)


# the walk-through on the shipped numbers set alone (a few minutes); also COMPGEN_README_RUN=1
@pytest.mark.readme_run
def test_readme_numbers_walk_through_runs(tmp_path, data_dir):
    assert len(commands("Walk-through: the numbers set")) >= 15
    run_blocks(tmp_path, data_dir, "Walk-through: the numbers set")
    assert (tmp_path / "exported" / "numbers-gen" / "manifest.json").is_file()
    rows = (tmp_path / "numbers-rr.tsv").read_text().splitlines()
    assert [r for r in rows if r and not r.startswith("#")]
