"""The user's own data: files and folders in every format read into the same example table,
and every way a file used to be misread silently is now one ``error:`` line, exit 2.
Data: the shipped numbers set (tests/data/numbers: digits -> English words)."""

import json
import sys
from pathlib import Path

import polars as pl
import pytest
from cli_in_process import assert_one_error, run

from compgen.data import load_dataset, read_data_path
from compgen.data.files import Fields
from compgen.errors import UserError

NUMBERS = Path(__file__).resolve().parent / "data" / "numbers"
FORMATS = ("tsv", "jsonl", "csv", "parquet")






# ---------------------------------------------------------------- formats and folders

@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_gives_the_same_table_with_splits(fmt):
    reference = load_dataset(str(NUMBERS / "tsv"))
    table = load_dataset(str(NUMBERS / fmt))
    assert table.columns == ["x", "y", "split"]
    assert table.equals(reference)
    counts = dict(table.group_by("split").len().iter_rows())
    assert counts == {"train": 732, "dev": 40, "test": 100}
    row = table.filter(pl.col("x") == ["6", "9", "4"]).row(0, named=True)
    assert row == {"x": ["6", "9", "4"], "y": ["six", "hundred", "ninety", "four"], "split": "test"}


def test_numbers_oracle_accepts_its_data():
    sys.path.insert(0, str(NUMBERS))
    try:
        from number_words import is_correct
    finally:
        sys.path.remove(str(NUMBERS))
    table = load_dataset(str(NUMBERS / "csv"))
    assert all(is_correct(x, y) for x, y in table.select("x", "y").iter_rows())
    assert not is_correct(["7", "4", "2"], ["seven", "hundred", "forty"])
    assert is_correct("1 2", "twelve") and not is_correct("0 7", "seven")


def test_jsonl_and_csv_are_records_not_corpora(tmp_path):
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text('{"source": "1 2", "target": "twelve", "id": 3}\n\n'
                     '{"source": "2", "target": "two", "id": 4}\n')
    assert read_data_path(jsonl).select("x", "y").rows() == [(["1", "2"], ["twelve"]), (["2"], ["two"])]
    tokens = tmp_path / "t.jsonl"
    tokens.write_text('{"input": ["1", "2"], "output": ["twelve"]}\n')
    assert read_data_path(tokens).select("x", "y").rows() == [(["1", "2"], ["twelve"])]
    csv = tmp_path / "d.csv"
    csv.write_text('question,answer\n"1, 2",twelve\n')
    table = read_data_path(csv, Fields(x="question", y="answer"))
    assert table.select("x", "y").rows() == [(["1,", "2"], ["twelve"])]


def test_tsv_header_is_not_a_data_row_and_columns_name_a_headerless_tsv(tmp_path):
    headed = tmp_path / "h.tsv"
    headed.write_text("input\toutput\n1 2\ttwelve\n3\tthree\n")
    assert read_data_path(headed)["x"].to_list() == [["1", "2"], ["3"]]
    plain = tmp_path / "p.tsv"
    plain.write_text("7\t1 2\ttwelve\n8\t3\tthree\n")
    table = read_data_path(plain, Fields(columns=("id", "input", "output")))
    assert table.select("x", "y").rows() == [(["1", "2"], ["twelve"]), (["3"], ["three"])]


def test_a_split_field_gives_a_file_its_splits(tmp_path):
    jsonl = tmp_path / "d.jsonl"
    jsonl.write_text("".join(json.dumps({"input": str(n), "output": "w", "split": s}) + "\n"
                             for n, s in enumerate(["train", "validation", "test"])))
    assert read_data_path(jsonl)["split"].to_list() == ["train", "dev", "test"]


def test_bom_is_dropped_and_text_nfc_normalised(tmp_path):
    bom = tmp_path / "b.tsv"
    bom.write_bytes("\ufeffinput\toutput\ncafe\u0301\tx\n".encode())
    table = read_data_path(bom)
    assert table["x"].to_list() == [["caf\u00e9"]]          # header dropped, NFC
    scan = tmp_path / "s.txt"
    scan.write_bytes("\ufeffIN: jump OUT: I_JUMP\n".encode())
    assert read_data_path(scan)["y"].to_list() == [["I_JUMP"]]


def test_hugging_face_folder(tmp_path):
    folder = tmp_path / "hf"
    for split in ("train", "test"):
        (folder / split).mkdir(parents=True)
        pl.DataFrame({"source": ["1", "2"], "target": ["one", "two"]}).write_ipc_stream(
            folder / split / "data-00000-of-00001.arrow")
    (folder / "dataset_dict.json").write_text('{"splits": ["train", "test"]}')
    table = load_dataset(str(folder))
    assert table["split"].to_list() == ["train", "train", "test", "test"]
    assert table["y"].to_list()[0] == ["one"]


# ---------------------------------------------------------------- silent misreads: errors

@pytest.mark.parametrize("name,content,fragments", [
    ("d.txt", '{"input": "1", "output": "one"}\n', ["d.txt:1:", "JSON object", ".jsonl"]),
    ("d.txt", "input,output\n1,one\n", ["d.txt:1:", "CSV header", ".csv"]),
    ("d.jsonl", '{"input": "1", "output": "one"}\n{"input": "2"\n', ["d.jsonl:2:", "not a JSON object"]),
    ("d.jsonl", '{"input": "1", "output": "one"}\n[1, 2]\n', ["d.jsonl:2:", "expected an object"]),
    ("d.jsonl", '{"question": "1", "answer": "one"}\n', ["d.jsonl", "no input (x) field", "--x-field"]),
    ("d.jsonl", '{"input": "1", "output": "one"}\n{"input": "2", "output": null}\n',
     ["d.jsonl:2:", "no value for the y field"]),
    ("d.csv", "id,output\n1,one\n", ["d.csv", "expected one of x, input, source, src"]),
    ("d.csv", "input,output\n1,one\n2,two,extra\n", ["d.csv", "not a CSV file"]),
    ("d.tsv", "input\toutput\n1\tone\n2\n", ["d.tsv:3:", "expected 2"]),
    ("d.parquet", "not parquet", ["d.parquet", "not a parquet file"]),
    ("d.tsv", "a\tb\tc\td\n", ["d.tsv:1:", "4 tab-separated fields", "--columns"]),
])
def test_misread_formats_are_one_error_line(tmp_path, capsys, monkeypatch, name, content, fragments):
    path = tmp_path / name
    path.write_text(content)
    assert_one_error(run(capsys, monkeypatch, "data", "stats", path), *fragments)


def test_x_field_option_reaches_the_reader(tmp_path, capsys, monkeypatch):
    path = tmp_path / "d.jsonl"
    path.write_text('{"q": "1 2", "a": "twelve"}\n')
    assert_one_error(run(capsys, monkeypatch, "data", "stats", path), "no input (x) field")
    code, _, out = run(capsys, monkeypatch, "data", "stats", path, "--x-field", "q", "--y-field", "a")
    assert code == 0 and "train" in out


def test_folder_errors(tmp_path, capsys, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "notes.md").write_text("x")
    assert_one_error(run(capsys, monkeypatch, "data", "stats", empty), "found none")
    two = tmp_path / "two"
    two.mkdir()
    (two / "train.tsv").write_text("1\tone\n")
    (two / "train.jsonl").write_text('{"input": "1", "output": "one"}\n')
    assert_one_error(run(capsys, monkeypatch, "data", "stats", two), "two files for the train split")
    odd = tmp_path / "odd"
    odd.mkdir()
    (odd / "train.xlsx").write_text("1\tone\n")
    assert_one_error(run(capsys, monkeypatch, "data", "stats", odd), "train.xlsx", "unknown format")


def test_evaluate_grammar_on_a_single_file_asks_for_a_folder(tmp_path, capsys, monkeypatch):
    grammar = tmp_path / "g.txt"
    grammar.write_text("NT_1 ### NT_1\n")
    test_file = NUMBERS / "tsv" / "test.tsv"
    assert_one_error(run(capsys, monkeypatch, "evaluate-grammar", grammar, "--data", test_file),
                     str(test_file), "needs a test split", "folder")


def test_folder_is_a_data_set_for_geca_and_stats(tmp_path, capsys, monkeypatch):
    out = tmp_path / "geca.tsv"
    code, lines, _ = run(capsys, monkeypatch, "augment", "geca", NUMBERS / "jsonl", "-o", out,
                         "--n-sample", "50")
    assert code == 0, lines
    header, *rows = out.read_text().splitlines()
    assert header == "#x\ty" and 0 < len(rows) <= 50 and all("\t" in row for row in rows)


def test_evaluate_without_data_does_not_call_the_training_file_test(tmp_path, capsys, monkeypatch):
    train = tmp_path / "train.tsv"
    train.write_text("".join(f"{n}\tw{n}\n" for n in range(12)))
    model = tmp_path / "p.pt"
    code, lines, _ = run(capsys, monkeypatch, "train", "predictor", "--data", train, "-o", model,
                         "--epochs", "1", "--threads", "1")
    assert code == 0, lines
    from compgen.training.checkpoint import load_checkpoint

    source = load_checkpoint(model).config["run"]["data_source"]
    assert source["path"] == str(train.resolve()) and len(source["sha256"]) == 64
    assert_one_error(run(capsys, monkeypatch, "evaluate", model), str(train), "no test split")
    code, lines, out = run(capsys, monkeypatch, "evaluate", model, "--data", train)
    assert code == 0 and "test" in out, lines


def test_reader_errors_are_user_errors(tmp_path):
    with pytest.raises(UserError, match="no such file or folder"):
        read_data_path(tmp_path / "missing.tsv")


# ---------------------------------------------------------------- every step, every format

@pytest.mark.parametrize("fmt", FORMATS)
def test_steps_run_from_every_format(tmp_path, capsys, monkeypatch, fmt):
    """stats, GECA, a predictor trained with GECA's rows and its evaluation on the test
    split, from the same split in each format: the same GECA rows from each."""
    folder = NUMBERS / fmt
    code, lines, out = run(capsys, monkeypatch, "data", "stats", folder)
    assert code == 0 and "732" in out and "100" in out, lines
    rows = tmp_path / "geca.tsv"
    code, lines, _ = run(capsys, monkeypatch, "augment", "geca", folder, "-o", rows,
                         "--variants", "all", "--n-sample", "60")
    assert code == 0, lines
    reference = tmp_path / "reference.tsv"
    code, lines, _ = run(capsys, monkeypatch, "augment", "geca", NUMBERS / "tsv", "-o", reference,
                         "--variants", "all", "--n-sample", "60")
    assert code == 0 and rows.read_text() == reference.read_text() != "", lines
    model = tmp_path / "p.pt"
    code, lines, _ = run(capsys, monkeypatch, "train", "predictor", "--data", folder, "--augment",
                         rows, "-o", model, "--epochs", "1", "--threads", "1")
    assert code == 0, lines
    code, lines, out = run(capsys, monkeypatch, "evaluate", model, "-o", tmp_path / "r.csv")
    assert code == 0, lines
    test = pl.read_csv(tmp_path / "r.csv").filter(pl.col("set") == "test")
    assert test["n"].to_list() == [100] and 0.0 <= test["exact_match"][0] <= 1.0


def test_a_folder_with_a_dev_split_keeps_it_for_the_predictor():
    """A user's folder with train/dev/test: dev pairs are the predictor's dev set and every
    training pair is trained on (the papers' sets keep their recipes: a share of train)."""
    from compgen.training.predictor import split_train_dev

    table = load_dataset(str(NUMBERS / "tsv"))
    train, dev = split_train_dev(table, 0.05, seed=0, own_dev=True)
    rows = {s: table.filter(pl.col("split") == s).height for s in ("train", "dev")}
    assert (len(train), len(dev)) == (rows["train"], rows["dev"])
    held_out, _ = split_train_dev(table, 0.05, seed=0)
    assert len(held_out) < rows["train"]
