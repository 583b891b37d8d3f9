"""Record files whose table would not say what the file says: refused with the file and
line (or read with the row's true line)."""

from pathlib import Path

import pytest

from compgen.data.files import read_data_file
from compgen.errors import UserError

CASES = {
    "list-then-text.jsonl": ('{"x": ["a", "b"], "y": "c"}\n{"x": "d e", "y": "f"}\n',
                             "list-then-text.jsonl:2: field 'x' is text here but a list"),
    "number-after-text.jsonl": ('{"x": "a", "y": "c"}\n\n{"x": 5, "y": "f"}\n',
                                "number-after-text.jsonl:3: field 'x' is a number here"),
    "null-token.jsonl": ('{"x": ["a", null], "y": "c"}\n',
                         "null-token.jsonl:1: the list of field 'x' holds null"),
    "number-token.json": ('[{"x": "a", "y": "c"}, {"x": ["a", 2], "y": "d"}]',
                          "number-token.json (object 2): the list of field 'x' holds 2"),
    "repeated-key.jsonl": ('{"x": "a", "y": "c"}\n{"x": "a", "x": "b", "y": "c"}\n',
                           "repeated-key.jsonl:2: the key 'x' twice"),
    "repeated-key.json": ('[{"x": "a", "y": "b", "y": "c"}]', "the key 'y' twice"),
    "repeated-column.csv": ("input,input,output\na,b,c\n",
                            "repeated-column.csv:1: the column 'input' twice"),
    "repeated-column.tsv": ("x\ty\tx\na\tb\tc\n", "repeated-column.tsv:1: the column 'x' twice"),
    "quoted-empty.csv": ('input,output\na,b\n"",x\n', "quoted-empty.csv:3: the x field 'input' is empty"),
    "empty-list.jsonl": ('{"x": ["a"], "y": "c"}\n{"x": [], "y": "c"}\n',
                         "empty-list.jsonl:2: the x field 'x' is empty"),
    "quoted-newline.csv": ('input,output\n"a\nb",x\nc,\n',
                           "quoted-newline.csv:4: no value for the y field 'output'"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_file_and_line_are_named(tmp_path: Path, name: str):
    text, message = CASES[name]
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(UserError) as caught:
        read_data_file(path)
    assert str(caught.value).startswith(str(tmp_path)) and message in str(caught.value), \
        str(caught.value)


def test_one_kind_per_field_reads_as_before(tmp_path: Path):
    path = tmp_path / "ok.jsonl"
    path.write_text('{"x": ["a", "b"], "y": "c", "id": 1}\n{"x": ["d"], "y": "e f", "id": 2}\n',
                    encoding="utf-8")
    table = read_data_file(path)
    assert table["x"].to_list() == [["a", "b"], ["d"]]
    assert table["y"].to_list() == [["c"], ["e", "f"]]
    csv = tmp_path / "ok.csv"
    csv.write_text('input,output\n"a,b",x\nc,d\n', encoding="utf-8")
    assert read_data_file(csv)["x"].to_list() == [["a,b"], ["c"]]
