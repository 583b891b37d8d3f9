"""The README's command blocks, as written: every `compgen` line parses against the CLI,
every file a line reads was written by an earlier line, no line overwrites a file an
earlier line wrote (except --resume, which continues it), and every line of a long command
says how long it takes and gives a shortened form (`[shorter: OPTIONS]` in its comment,
options appended to the line's first `compgen` command).

With COMPGEN_README_RUN=1 the blocks also run, in order, in a temporary folder, each line
in its shortened form where it has one (35–55 min on 2 shared cores); a `--precision bf16`
line on a CPU without bf16 units must give its one `error:` line instead.
COMPGEN_README_ONLY=REGEX runs only the commands that match it and the earlier commands
that write the files they read."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typer

from compgen.cli import app
from compgen.cli.commands import LazyGroup, every_command
from compgen.system.precision import cpu_has_bf16

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
FILE_SUFFIXES = (".pt", ".tsv", ".bin", ".arpa", ".txt", ".csv")
# options for the test machine only (appended after a line's shortened form)
TEST_ONLY = {
    "train generator": ["--quiet", "--threads", "1"],
    "train predictor": ["--threads", "1"],
    "sample": ["--threads", "1"],
    "pipeline": ["--threads", "1", "--root", "runs/pipeline"],
}
# commands that take over a minute at their defaults: each README line of one gives its
# time and a shortened form
LONG = {"train generator", "train predictor", "train inflection", "sample", "export",
        "select", "augment csl"}
SHORTER = re.compile(r"\[shorter: ([^\],]+)")
DURATION = re.compile(r"~?\d[\d.,-]* ?(s|min|h)\b")


def bash_lines() -> list[tuple[str, str]]:
    """(command line, comment) of the README's bash blocks; blank and comment lines dropped."""
    lines, inside = [], False
    for line in README.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            inside = line.strip() == "```bash" and not inside
            continue
        if inside:
            code, _, comment = line.partition(" #")
            code = code.strip()
            if code and not code.startswith("#"):
                lines.append((code, comment.strip()))
    return lines


def commands() -> list[list[str]]:
    """Every shell command of the blocks (split on && and ;), as words."""
    return [words for words, _ in shortened_commands()]


def shortened_commands() -> list[tuple[list[str], list[str]]]:
    """(words, options of the line's shortened form) of every shell command; the options
    belong to the first `compgen` command of their line."""
    out = []
    for line, comment in bash_lines():
        marker = SHORTER.search(comment)
        shorter = shlex.split(marker.group(1)) if marker else []
        for part in re.split(r"\s*(?:&&|;)\s*", line):
            if part:
                words = shlex.split(part)
                out.append((words, shorter if words[0] == "compgen" else []))
                if words[0] == "compgen":
                    shorter = []
    return out


def leaf(words: list[str]):
    """(command path, click command, its arguments) of `compgen ...` words."""
    group, path = typer.main.get_command(app), []
    rest = words[1:]
    while isinstance(group, LazyGroup) and rest and rest[0] in group.table:
        group = every_command(group)[rest[0]]
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
        for name in reads:   # written by an earlier line, or shipped (tests/data/...)
            assert name in written or (ROOT / name).is_file(), (
                f"'{' '.join(words)}' reads {name}, which no earlier line writes")
        for name in outputs:
            assert name not in written or "--resume" in args, (
                f"'{' '.join(words)}' overwrites {name}, written by '{written[name]}'")
            written[name] = " ".join(words)


def test_every_long_command_says_how_long_and_how_to_shorten_it():
    for (line, comment), has_marker in _lines_with_markers():
        for part in re.split(r"\s*(?:&&|;)\s*", line):
            words = shlex.split(part)
            if words[0] != "compgen" or "..." in words:
                continue
            path, command, args = leaf(words)
            if path in LONG:
                took = DURATION.search(comment)
                assert took, f"'{line}': a long command; its comment gives no time"
                assert has_marker or took.group(1) == "s", (
                    f"'{line}': over a minute; its comment gives no [shorter: ...]")
            break   # the marker belongs to the line's first compgen command
    for words, shorter in shortened_commands():
        if shorter and "..." not in words:
            path, command, args = leaf(words)
            command.make_context(path, [*args, *shorter])   # the shortened form parses


def _lines_with_markers():
    return [((line, comment), bool(SHORTER.search(comment))) for line, comment in bash_lines()]


def run_plan(only: str | None) -> list[tuple[list[str], list[str]]]:
    """The README's commands to run, shortened: all of them, or those matching ``only``
    and the earlier ones that write the files they read."""
    plan = []
    for words, shorter in shortened_commands():
        if "..." in words or words[0] in ("make",) or words[0].startswith(("SEEDS=", ".venv")):
            continue   # set-up, placeholders, scripts with their own wrappers
        reads, writes = [], []
        if words[0] == "compgen":
            path, command, args = leaf(words)
            if path == "data fetch":
                continue   # downloads; the data folder is given
            if "--list" not in args and "--help" not in args:
                reads, writes = files_read_and_written(path, command, args)
        elif ">" in words:
            writes = [words[words.index(">") + 1]]
            reads = [w for w in words[:words.index(">")] if w.endswith(FILE_SUFFIXES)]
        plan.append((words, shorter, reads, writes))
    if only is None:
        return [(words, shorter) for words, shorter, _, _ in plan]
    keep, needed = set(), set()
    for i in range(len(plan) - 1, -1, -1):
        words, _, reads, writes = plan[i]
        if re.search(only, " ".join(words)) or needed & set(writes):
            keep.add(i)
            needed -= set(writes)
            needed |= set(reads)
    return [(words, shorter) for i, (words, shorter, _, _) in enumerate(plan) if i in keep]


def test_a_subset_runs_with_the_lines_it_needs():
    plan = [" ".join(words) for words, _ in run_plan(r"compgen predict ")]
    assert plan[-1].startswith("compgen predict exported/pred")
    assert any(line.startswith("compgen export pred.pt") for line in plan)
    assert any(line.startswith("compgen train predictor --data scan/jump") for line in plan)
    assert not any(line.startswith("compgen augment geca") for line in plan)


# runs every README command (35–55 min on 2 shared cores): deselected unless COMPGEN_README_RUN=1
@pytest.mark.readme_run
def test_readme_blocks_run_in_order(tmp_path, data_dir):
    run_commands(tmp_path, data_dir, run_plan(os.environ.get("COMPGEN_README_ONLY")))


# the walk-through on the shipped numbers set alone (minutes); also COMPGEN_README_RUN=1
@pytest.mark.readme_run
def test_readme_numbers_walk_through_runs(tmp_path, data_dir):
    plan = run_plan(r"numbers")
    assert len(plan) >= 15
    run_commands(tmp_path, data_dir, plan)
    assert (tmp_path / "exported" / "numbers-gen" / "manifest.json").is_file()
    rows = (tmp_path / "numbers-rr.tsv").read_text().splitlines()
    assert [r for r in rows if r and not r.startswith("#")]


def needs_bf16_units(words: list[str]) -> bool:
    """True for a command that asks for bf16 (``--precision bf16``; the last value wins)."""
    values = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "--precision"]
    return bool(values) and values[-1] == "bf16"


def run_commands(tmp_path, data_dir, plan) -> None:
    """Run ``plan`` (``run_plan``'s commands, shortened) in order in ``tmp_path``, which sees
    the repository's tests/ folder (the README's tests/data/... paths)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "COMPGEN_DATA": str(data_dir)}
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    for words, shorter in plan:
        if words[0] == "compgen":
            path, _, _ = leaf(words)
            words = [sys.executable, "-m", "compgen", *words[1:], *shorter,
                     *TEST_ONLY.get(path, [])]
        elif ">" in words:
            i = words.index(">")
            with open(tmp_path / words[i + 1], "w") as out:
                subprocess.run(words[:i], cwd=tmp_path, stdout=out, check=True)
            continue
        proc = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True,
                              check=False)
        if needs_bf16_units(words) and not cpu_has_bf16():
            # the README's bf16 lines are for CPUs with the units; elsewhere the refusal
            lines = proc.stderr.strip().splitlines()
            assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(
                "error: --precision bf16: this CPU has no bf16 units"), (
                f"{' '.join(words)}\n{proc.stderr[-2000:]}")
            continue
        assert proc.returncode == 0, f"{' '.join(words)}\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}"
