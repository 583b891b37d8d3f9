"""Every samples TSV compgen writes reads back as written, whatever its first row looks
like: the writers put the ``#x<TAB>y`` header before rows of pairs, so that no row is read
as SCAN (``IN: ...``), as a header line (``x<TAB>y``, ``input<TAB>output``, a line of
names) or lost to the byte-order mark; a row that would still read back as something
else (an x starting with ``#``, a comment; no x and no y, a blank line; a token the
readers would NFC-normalise) is refused, naming the row and the token, with nothing
written. Error lines name the row's own line after blank lines."""

import json
import unicodedata

import polars as pl
import pytest
from cli_in_process import assert_one_error, run

import compgen
from compgen.api import _saved_beside
from compgen.augment.geca.files import write_tables_tsv
from compgen.augment.stem_corrupt.corrupt import read_triples
from compgen.data.files import Fields, read_data_path, read_pairs_file
from compgen.data.lm import parse_corpus
from compgen.data.table import make_table
from compgen.errors import UserError
from compgen.io import refuse_comment_rows, write_samples_tsv
from compgen.lm.kenlm_tools import resolve_corpus

# rows GECA recombines (into "look left"), after the first
REST = [(["jump", "twice"], ["J", "J"]), (["walk", "twice"], ["W", "W"]),
        (["jump", "left"], ["L", "J"]), (["walk", "left"], ["L", "W"]),
        (["look", "twice"], ["K", "K"])]
# first rows that a header-less x<TAB>y file would read as something else
FIRST = {"scan": (["IN:", "jump"], ["J"]), "scan-line": (["IN:", "walk", "OUT:", "W"], ["Q"]),
         "x-y": (["x"], ["y"]), "input-output": (["Input"], ["Output"]),
         "names": (["run"], ["R"]), "bom": (["\ufeffrun"], ["R"]), "json": (["{}"], ["W"])}


def written_by(writer, path, rows, scores=False):
    if writer == "tables":
        table = pl.DataFrame({"x": [x for x, _ in rows], "y": [y for _, y in rows]},
                             schema={"x": pl.List(pl.String), "y": pl.List(pl.String)})
        write_tables_tsv(path, [table.head(1), table.slice(1)])
    else:
        write_samples_tsv(path, rows, {"logprob": [-1.5] * len(rows)} if scores else None)


def read_back(path):
    table = read_data_path(path)
    return list(zip(table["x"].to_list(), table["y"].to_list())), read_pairs_file(path, "`augment`", Fields())


@pytest.mark.parametrize("writer", ["tables", "samples", "scored"])
@pytest.mark.parametrize("name", sorted(FIRST))
def test_any_first_row_reads_back_as_written(tmp_path, name, writer):
    rows = [FIRST[name], *REST]
    path = tmp_path / "out.tsv"
    written_by("samples" if writer == "scored" else writer, path, rows, writer == "scored")
    as_data, as_pairs = read_back(path)
    assert as_data == rows and as_pairs == rows


def test_a_corpus_is_written_without_header_and_reads_back(tmp_path):
    """No x anywhere: ``<TAB>sentence`` lines, which `lm train` reads as the sentences."""
    rows = [([], ['{"a":', "1}"]), ([], ["the", "cat"])]
    path = tmp_path / "corpus.tsv"
    write_samples_tsv(path, rows)
    assert path.read_text(encoding="utf-8") == '\t{"a": 1}\n\tthe cat\n'
    table = read_data_path(path)
    assert list(zip(table["x"].to_list(), table["y"].to_list())) == rows
    assert parse_corpus(path.read_text(encoding="utf-8")) == [y for _, y in rows]


UNREADABLE = {"comment": ((["#walk", "twice"], ["W", "W"]), "'#walk'"),
              "blank": (([], []), "both empty"),
              "nfd": ((["cafe\u0301"], ["C"]), repr("cafe\u0301"))}


@pytest.mark.parametrize("writer", ["tables", "samples"])
@pytest.mark.parametrize("name", sorted(UNREADABLE))
def test_a_row_that_would_not_read_back_is_refused_and_nothing_written(tmp_path, name, writer):
    row, shown = UNREADABLE[name]
    with pytest.raises(UserError) as caught:
        written_by(writer, tmp_path / "out.tsv", [*REST, row])
    assert f"row {len(REST) + 1}" in str(caught.value) and shown in str(caught.value), str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_comment_row_in_a_nonfirst_table_is_named_by_its_row_in_the_file(tmp_path):
    """``--concat`` writes the training rows, then the synthesized ones: the row number
    counts both."""
    with pytest.raises(UserError, match=f"row {len(REST) + 1}"):
        written_by("tables", tmp_path / "out.tsv", [*REST, (["#a"], ["A"])])


def test_the_header_is_not_a_row_and_nfc_tokens_pass(tmp_path):
    rows = [(["café"], ["C"]), *REST]
    assert unicodedata.is_normalized("NFC", rows[0][0][0])
    path = tmp_path / "out.tsv"
    write_samples_tsv(path, rows)
    assert path.read_text(encoding="utf-8").splitlines()[0] == "#x\ty"
    assert read_back(path)[1] == rows


def data_file(path, first):
    path.write_text("\n".join(json.dumps({"x": x, "y": y}) for x, y in [first, *REST]) + "\n",
                    encoding="utf-8")
    return path


@pytest.mark.parametrize("name", ["x-y", "scan", "names"])
def test_geca_output_through_the_command_line_reads_back(tmp_path, capsys, monkeypatch, name):
    data = data_file(tmp_path / "d.jsonl", FIRST[name])
    out = tmp_path / "out.tsv"
    code, lines, _ = run(capsys, monkeypatch, "augment", "geca", data, "--preset", "generic",
                         "--concat", "-o", out)
    assert code in (0, None) and not lines, lines
    as_data, as_pairs = read_back(out)
    assert as_data[:len(REST) + 1] == [FIRST[name], *REST] and as_pairs == as_data
    assert (["look", "left"], ["L", "K"]) in as_data[len(REST) + 1:]


def test_geca_refuses_an_output_row_read_as_a_comment(tmp_path, capsys, monkeypatch):
    data = data_file(tmp_path / "d.jsonl", (["#walk", "twice"], ["W", "W"]))
    out = tmp_path / "out.tsv"
    assert_one_error(run(capsys, monkeypatch, "augment", "geca", data, "--preset", "generic",
                         "--concat", "-o", out), out, "'#walk'", "row 1")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.jsonl"]


# ------------------------------------------------------------------ line numbers

@pytest.mark.parametrize("name, text, line", [
    ("d.tsv", "x\ty\n\njump\tJ\n\n\nwalk\t \nrun\tR\n", 6),
    ("d.jsonl", '{"x": "jump", "y": "J"}\n\n\n{"x": "walk", "y": ""}\n', 4),
    ("d.csv", 'x,y\n"jump\ntwice",J J\n\nrun,R\nwalk,""\n', 6),   # after a quoted newline
])
def test_a_row_after_blank_lines_is_named_by_its_own_line(tmp_path, name, text, line):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(UserError, match=f"^{path}:{line}: the y field 'y' is empty"):
        read_data_path(path)


def test_blank_lines_in_a_csv_are_skipped_as_in_tsv_and_jsonl(tmp_path):
    """Polars made each an empty row, refused as "no value for the x field"."""
    path = tmp_path / "d.csv"
    path.write_text("x,y\n\njump twice,J J\n\nrun,R\n\n")
    assert read_data_path(path).select("x", "y").rows() == [(["jump", "twice"], ["J", "J"]),
                                                            (["run"], ["R"])]


def test_a_runner_row_read_as_a_comment_is_refused():
    """The C++ runner writes its samples itself: a row after its header that the readers
    would skip is refused when compgen reads the file back."""
    header = "#x\ty\tlogprob\n"
    refuse_comment_rows(header + "jump\tJ\t-1\n", "s.tsv")
    with pytest.raises(UserError, match=r"^s\.tsv: the first x token '#jump' of row 2 "):
        refuse_comment_rows(header + "walk\tW\t-1\n#jump twice\tJ J\t-2\n", "s.tsv")


GOLD = "".join(f"{stem}ar\t{stem}o\tV;IND;PRS;1;SG\n{stem}ar\t{stem}aste\tV;IND;PST;2;SG;PFV\n"
               for stem in ("habl", "cant", "camin", "mir", "estudi", "trabaj", "pregunt", "dese"))


def test_a_stem_corrupt_pool_named_tsv_reads_back_as_sigmorphon(tmp_path, capsys, monkeypatch):
    """Its third column is a tag set (``V;PST``), not a COGS type: read as SIGMORPHON, as
    `read_triples` reads it, whatever the file's name."""
    gold = tmp_path / "gold.txt"
    gold.write_text(GOLD, encoding="utf-8")
    pool = tmp_path / "pool.tsv"
    code, lines, _ = run(capsys, monkeypatch, "augment", "stem-corrupt", gold, "--pool", "20",
                         "--iterations", "2", "-o", pool)
    assert code in (0, None), lines
    table = read_data_path(pool)
    triples = read_triples(pool)
    assert table.columns[-3:] == ["lemma", "form", "tags"] and table.height == len(triples)
    assert [(lemma, form, ";".join(tags)) for lemma, form, tags in
            table.select("lemma", "form", "tags").rows()] == triples


def test_a_dataframe_saved_beside_a_checkpoint_reads_back_as_itself(tmp_path):
    """``train_predictor(DataFrame, output=M)`` saves the table as ``M.data/`` for the
    checkpoint's data reference: a SIGMORPHON form's space token comes back from it (joined
    into text it would be lost)."""
    table = make_table([["a", " ", "b", "V", "PST"], ["c", "d"]], [["a", " ", "b"], ["C"]],
                       "test")
    with _saved_beside(table, tmp_path / "m.pt") as dataset:
        again = compgen.load(dataset.name)
    assert again.select("x", "y").rows() == table.select("x", "y").rows()
    assert again["split"].to_list() == ["test", "test"]


def test_lm_train_refuses_a_samples_tsv_of_pairs_and_reads_a_corpus(tmp_path, capsys,
                                                                     monkeypatch):
    """Read as a corpus, the header and both sides of every pair would be sentences; a
    corpus as GECA writes it (no x) is one."""
    pairs, corpus = tmp_path / "pairs.tsv", tmp_path / "corpus.tsv"
    write_samples_tsv(pairs, REST)
    write_samples_tsv(corpus, [([], y) for _, y in REST])
    assert_one_error(run(capsys, monkeypatch, "lm", "train", pairs, "-o", tmp_path / "m.arpa"),
                     pairs, "--side")
    assert resolve_corpus(corpus) == corpus
