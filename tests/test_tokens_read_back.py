"""Every token compgen writes to a samples TSV reads back as itself: a token that would
not (white space, NUL, U+2581 or empty) is refused where data is read, and by the
writers for tables that come from the Python API."""

import json

import polars as pl
import pytest

from compgen.augment.geca.files import write_tables_tsv
from compgen.data.files import read_data_file
from compgen.errors import UserError
from compgen.io import read_samples_tsv, write_samples_tsv

BAD = {"tab": "a\tb", "newline": "a\nb", "u001c": "a\x1cb", "u001f": "a\x1fb", "nul": "a\x00b",
       "space": "a b", "u2581": "a\u2581b", "empty": ""}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_data_token_that_would_not_read_back_is_refused_with_its_line(tmp_path, name):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"x": ["walk"], "y": ["W"]}) + "\n"
                    + json.dumps({"x": ["jump", BAD[name]], "y": ["J"]}) + "\n")
    with pytest.raises(UserError) as caught:
        read_data_file(path)
    message = str(caught.value)
    assert repr(BAD[name]) in message
    if name != "empty":
        assert message.startswith(f"{path}:2:")


def test_a_space_token_is_written_and_read_back(tmp_path):
    table = pl.DataFrame({"x": [["a", " ", "b"]], "y": [["c"]]})
    write_tables_tsv(tmp_path / "o.tsv", [table])
    assert read_samples_tsv(tmp_path / "o.tsv") == [(["a", " ", "b"], ["c"])]


@pytest.mark.parametrize("name", sorted(BAD))
def test_the_writers_refuse_an_api_table_that_would_not_read_back(tmp_path, name):
    table = pl.DataFrame({"x": [["ok"], ["jump", BAD[name]]], "y": [["O"], ["J"]]})
    with pytest.raises(UserError, match="row 2"):
        write_tables_tsv(tmp_path / "g.tsv", [table])
    with pytest.raises(UserError, match="row 2"):
        write_samples_tsv(tmp_path / "s.tsv", zip(table["x"].to_list(), table["y"].to_list()))
    assert list(tmp_path.iterdir()) == []
