"""An augmenter whose output cannot help says so: GECA that synthesizes nothing, CSL whose
grammar derives none of the held-out pairs or whose samples all carry a training output,
each a ``warning:`` line with the reason (command line) or a UserWarning (Python API);
data that recombines gives no warning."""

import warnings

import polars as pl
import pytest
from cli_in_process import run

import compgen

VERBS = {"walk": "WALK", "run": "RUN", "jump": "JUMP", "look": "LOOK"}
COUNTS = {"": 1, "twice": 2, "thrice": 3}


def commands(held_out=("look", "thrice")):
    """Commands -> actions (SCAN-like); one verb-count pair held out for dev and test."""
    rows = []
    for verb, action in VERBS.items():
        for count, times in COUNTS.items():
            x = f"{verb} {count}".strip()
            split = "test" if (verb, count) == held_out else "train"
            rows.append((x, " ".join([action] * times), split))
    return pl.DataFrame(rows, schema=["x", "y", "split"], orient="row")


def lookup(n=14):
    """Each input names one output token of its own: nothing to decompose on the output
    side, and the held-out rows use words training never has."""
    words = ["red", "green", "blue", "tall", "small", "old", "new"]
    rows = [(f"{words[i % 7]} {words[(i * 3 + 1) % 7]} item{i}", f"ANSWER_{i}", "train")
            for i in range(n)]
    rows += [(f"unseen{i} thing", f"ANSWER_{n + i}", "test") for i in range(3)]
    return pl.DataFrame(rows, schema=["x", "y", "split"], orient="row")


def ids_then_questions():
    """A 3-column file read with the wrong columns: x = a unique id, y = the question."""
    questions = ["what is the capital of texas", "how long is the ohio river",
                 "what is the capital of ohio", "how long is the red river",
                 "what is the population of texas", "how big is ohio"]
    return pl.DataFrame({"x": [str(i) for i in range(len(questions))], "y": questions,
                         "split": ["train"] * len(questions)})




def write_folder(table, folder):
    folder.mkdir()
    for split in table["split"].unique().to_list():
        rows = table.filter(pl.col("split") == split)
        (folder / f"{split}.tsv").write_text("".join(f"{x}\t{y}\n" for x, y in
                                                     rows.select("x", "y").iter_rows()))
    return folder


def test_geca_that_writes_nothing_says_why(tmp_path, capsys, monkeypatch):
    data = write_folder(ids_then_questions(), tmp_path / "ids")
    out = tmp_path / "geca.tsv"
    code, lines, _ = run(capsys, monkeypatch, "augment", "geca", data, "-o", out)
    assert code == 0 and out.read_text().strip() == ""
    assert len(lines) == 1 and lines[0].startswith("warning: GECA synthesized no example"), lines
    assert "--preset" in lines[0] and "templates" in lines[0]
    with pytest.warns(UserWarning, match="GECA synthesized no example.*preset"):
        assert compgen.geca(ids_then_questions()).height == 0


def test_geca_that_synthesizes_gives_no_warning(tmp_path, capsys, monkeypatch):
    data = write_folder(commands(), tmp_path / "commands")
    code, lines, _ = run(capsys, monkeypatch, "augment", "geca", data, "-o", tmp_path / "g.tsv")
    assert code == 0 and (tmp_path / "g.tsv").read_text().strip() and not lines, lines


def test_csl_that_only_memorizes_says_so(tmp_path, capsys, monkeypatch, one_torch_thread):
    data = write_folder(lookup(), tmp_path / "lookup")
    out = tmp_path / "csl.tsv"
    code, lines, _ = run(capsys, monkeypatch, "augment", "csl", data, "-o", out, "--n", "30",
                         "--steps", "10", "--threads", "1")
    assert code == 0 and out.read_text().strip(), lines
    warned = [line for line in lines if line.startswith("warning: ")]
    assert any("derives none of the test (3) pairs" in line for line in warned), lines
    assert any("every one of CSL's" in line and "training output" in line for line in warned), lines
    with pytest.warns(UserWarning) as caught:
        compgen.csl(lookup(), 30, steps=10, dedup=False)
    messages = [str(w.message) for w in caught]
    assert any("derives none of the test (3) pairs" in m for m in messages), messages
    assert any("training output" in m and "`" not in m for m in messages), messages


def test_csl_that_recombines_gives_no_warning(tmp_path, capsys, monkeypatch, one_torch_thread):
    data = write_folder(commands(), tmp_path / "commands")
    code, lines, _ = run(capsys, monkeypatch, "augment", "csl", data, "-o", tmp_path / "c.tsv",
                         "--n", "30", "--steps", "10", "--threads", "1")
    assert code == 0 and not [line for line in lines if line.startswith("warning")], lines
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        compgen.csl(commands(), 30, steps=10)
