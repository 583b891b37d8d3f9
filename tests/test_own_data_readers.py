"""Tables a reader used to read shifted without a word: a TSV with more columns than
x<TAB>y, a header line of names the reader does not know, and augmented data in another
format than a samples TSV. Each is now read by its header or one ``error:`` line naming
the file and line; the real COGS and SIGMORPHON files still read as before."""

import json
from pathlib import Path

import polars as pl
import pytest
from cli_in_process import assert_one_error, run

from compgen.data import read_data_path
from compgen.data.files import Fields, read_pairs_file
from compgen.errors import UserError

# question -> SQL rows in the shape of GeoQuery's SQL split (variables filled in)
ROWS = [
    ("what is the capital of texas",
     "SELECT STATEalias0.CAPITAL FROM STATE AS STATEalias0 WHERE STATEalias0.STATE_NAME = \"texas\" ;"),
    ("how long is the mississippi river",
     "SELECT RIVERalias0.LENGTH FROM RIVER AS RIVERalias0 WHERE RIVERalias0.RIVER_NAME = \"mississippi\" ;"),
    ("what is the population of ohio",
     "SELECT STATEalias0.POPULATION FROM STATE AS STATEalias0 WHERE STATEalias0.STATE_NAME = \"ohio\" ;"),
]






def write(path, lines):
    path.write_text("".join("\t".join(row) + "\n" for row in lines))
    return path


def expected_pairs():
    return [(x.split(), y.split()) for x, y in ROWS]


# ---------------------------------------------------------------- a header of other names

def test_an_unknown_header_line_is_refused_naming_the_fields_to_give(tmp_path, capsys, monkeypatch):
    data = write(tmp_path / "geo.tsv", [("question", "sql"), *ROWS])
    assert_one_error(run(capsys, monkeypatch, "data", "stats", data),
                     f"{data}:1:", "header", "--x-field question --y-field sql", "--columns")
    with pytest.raises(UserError, match="looks like a header"):
        read_data_path(data)


def test_x_and_y_fields_read_a_tsv_by_its_header(tmp_path, capsys, monkeypatch):
    data = write(tmp_path / "geo.tsv", [("question", "sql"), *ROWS])
    table = read_data_path(data, Fields(x="question", y="sql"))
    assert list(zip(table["x"].to_list(), table["y"].to_list())) == expected_pairs()
    wide = write(tmp_path / "wide.tsv", [("id", "question", "sql")] +
                 [(str(n), x, y) for n, (x, y) in enumerate(ROWS)])
    table = read_data_path(wide, Fields(x="question", y="sql"))
    assert list(zip(table["x"].to_list(), table["y"].to_list())) == expected_pairs()
    code, lines, out = run(capsys, monkeypatch, "data", "stats", data, "--x-field", "question",
                           "--y-field", "sql")
    assert code == 0 and " 3 " in f" {out} ", (lines, out)
    # a name the header lacks is an error, not the first two columns
    assert_one_error(run(capsys, monkeypatch, "data", "stats", wide, "--x-field", "text",
                         "--y-field", "sql"), "no field 'text'", "--x-field", "question")


def test_columns_say_a_header_like_first_line_is_data(tmp_path):
    data = write(tmp_path / "d.tsv", [("question", "sql"), *ROWS])
    table = read_data_path(data, Fields(columns=("x", "y")))
    assert table.height == len(ROWS) + 1 and table["x"][0].to_list() == ["question"]


@pytest.mark.parametrize("first", [("jump", "I_JUMP"), ("walk", "I_WALK")])
def test_a_first_row_of_single_words_that_recur_is_data(tmp_path, first):
    """SCAN-like rows: the words of the first line recur below, so it is no header."""
    rows = [first, ("jump twice", "I_JUMP I_JUMP"), ("walk and jump", "I_WALK I_JUMP"),
            ("walk twice", "I_WALK I_WALK")]
    table = read_data_path(write(tmp_path / "d.tsv", rows))
    assert table.height == 4 and table["x"][0].to_list() == [first[0]]


# ---------------------------------------------------------------- three columns

def test_an_id_column_is_refused_not_read_as_the_input(tmp_path, capsys, monkeypatch):
    rows = [(str(n), x, y) for n, (x, y) in enumerate(ROWS, 1)]
    for name in ("geo.tsv", "geo.txt"):   # read as COGS / as SIGMORPHON before
        data = write(tmp_path / name, rows)
        assert_one_error(run(capsys, monkeypatch, "data", "stats", data),
                         f"{data}:", "3 tab-separated fields", "header", "--columns")
    table = read_data_path(data, Fields(columns=("id", "input", "output")))
    assert list(zip(table["x"].to_list(), table["y"].to_list())) == expected_pairs()


def test_an_id_column_with_one_word_last_field_is_refused(tmp_path, capsys, monkeypatch):
    data = write(tmp_path / "d.tsv", [(str(n), x, "easy") for n, (x, _) in enumerate(ROWS, 1)])
    assert_one_error(run(capsys, monkeypatch, "data", "stats", data), f"{data}:1:", "id column")


def test_a_headed_three_column_tsv_of_other_names_is_refused(tmp_path, capsys, monkeypatch):
    data = write(tmp_path / "d.tsv", [("id", "question", "sql")] +
                 [(str(n), x, y) for n, (x, y) in enumerate(ROWS)])
    assert_one_error(run(capsys, monkeypatch, "data", "stats", data),
                     f"{data}:1:", "--x-field question --y-field sql")


def test_real_cogs_and_sigmorphon_files_still_read(data_dir, require_data):
    cogs = require_data(data_dir / "cogs" / "dev.tsv")
    table = read_data_path(cogs)
    assert table.height == len(cogs.read_text().splitlines()) and "type" in table.columns
    morph = require_data(data_dir / "sigmorphon2018" / "spanish-train-low")
    table = read_data_path(morph)
    assert table.height == 100 and "lemma" in table.columns


# ---------------------------------------------------------------- augmented data

@pytest.mark.parametrize("fmt", ["tsv", "samples", "jsonl", "csv", "parquet"])
def test_augmented_data_comes_in_every_data_format(tmp_path, fmt):
    path = tmp_path / f"aug.{'tsv' if fmt == 'samples' else fmt}"
    frame = pl.DataFrame({"input": [x for x, _ in ROWS], "output": [y for _, y in ROWS]})
    if fmt == "tsv":
        write(path, [("input", "output"), *ROWS])
    elif fmt == "samples":   # what the augmenters write, scores included
        write(path, [("#x", "y", "score")] + [(x, y, "-1.5") for x, y in ROWS])
    elif fmt == "jsonl":
        path.write_text("".join(json.dumps(row) + "\n" for row in frame.iter_rows(named=True)))
    elif fmt == "csv":
        frame.write_csv(path)
    else:
        frame.write_parquet(path)
    assert read_pairs_file(path, "`augment`", Fields()) == expected_pairs()


def test_augmented_data_takes_the_data_fields_where_it_has_them(tmp_path):
    named = tmp_path / "aug.jsonl"
    named.write_text("".join(json.dumps({"question": x, "sql": y}) + "\n" for x, y in ROWS))
    samples = write(tmp_path / "geca.tsv", ROWS)   # header-less x<TAB>y, as GECA writes it
    fields = Fields(x="question", y="sql")
    assert read_pairs_file(named, "`augment`", fields) == expected_pairs()
    assert read_pairs_file(samples, "`augment`", fields) == expected_pairs()


def test_augmented_data_that_is_no_pairs_is_refused(tmp_path):
    corpus = tmp_path / "aug.txt"
    corpus.write_text("the cat sat\nthe dog ran\n")
    with pytest.raises(UserError, match="plain corpus"):
        read_pairs_file(corpus, "`augment`", Fields())
    with pytest.raises(UserError, match="no such file"):
        read_pairs_file(tmp_path / "missing.jsonl", "`augment`", Fields())


# ---------------------------------------------------------------- every command reading pairs

def test_train_generator_and_pipeline_own_take_the_field_names(tmp_path, capsys, monkeypatch):
    numbers = [tuple(line.split("\t")) for line in
               Path("tests/data/numbers/tsv/train.tsv").read_text().splitlines()[:80]]
    data = write(tmp_path / "numbers.tsv", [("question", "sql"), *numbers])
    out = tmp_path / "g.pt"
    code, lines, _ = run(capsys, monkeypatch, "train", "generator", "--data", str(data), "-o",
                         str(out), "--hidden", "8", "--embed", "8", "--attdim", "8",
                         "--max-steps", "1", "--quiet", "--x-field", "question", "--y-field", "sql")
    assert code == 0 and out.is_file(), lines
    # the generator recorded the pairs read by the header, not the header as a pair
    from compgen.training.checkpoint import load_checkpoint
    snapshot = load_checkpoint(out, kind="recombine").config["data_snapshot"]
    assert "question" not in json.dumps(snapshot)
    assert_one_error(run(capsys, monkeypatch, "pipeline", "jump-geca", "--x-field", "question"),
                     "--x-field", "pipeline own")
