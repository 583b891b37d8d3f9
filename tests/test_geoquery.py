"""GeoQuery as the GECA paper builds it (data/semparse.py of the reference): the four named
sets with the reference's sizes, the construction rules on a small file of the same
layout, the fetch with its checksums, and the paper's GECA preset as GeoQuery's default."""

import json

import pytest

from compgen.augment.geca import augment_file, make_config
from compgen.augment.geca.config import load_preset
from compgen.data import dataset_names, keeps_own_dev, load_dataset
from compgen.data.geoquery import parse_geoquery
from compgen.data.sources import fetch
from compgen.errors import UserError
from compgen.pipelines.rows import find_run
from compgen.pipelines.runs import PipelineOptions, make_geca
from compgen.pipelines.step_records import Timer

ENTRIES = [
    {"sql": ['SELECT CITY.NAME FROM CITY WHERE CITY.STATE = "state_name0" AND CITY.POP > (SELECT 1)',
             "SELECT something else"],
     "logic": ["( A , _city ( A , state_name0 ) )"],
     "query-split": "8",
     "sentences": [
         {"text": "Cities in state_name0", "question-split": "3",
          "variables": {"state_name0": "new mexico"}},
         {"text": "what cities are in state_name0 ?", "question-split": "9",
          "variables": {"state_name0": "utah"}}]},
    {"sql": ["SELECT COUNT ( * ) FROM STATE"], "logic": ["( A , _count ( A ) )"],
     "query-split": "test",
     "sentences": [{"text": "How many states", "question-split": "train", "variables": {}}]},
]


def rows(table, split):
    return [(" ".join(x), " ".join(y)) for x, y in
            table.filter(table["split"] == split).select("x", "y").iter_rows()]


def test_the_construction_rules_of_the_reference_loader():
    table = parse_geoquery(ENTRIES, "sql", "query", "<geo>")
    first = ("cities in new mexico",
             'SELECT CITY.NAME FROM CITY WHERE CITY.STATE = " new mexico " AND CITY.POP > ( SELECT 1 )')
    # fold 8 is dev; the paper's test mode puts dev into train and keeps it as dev too
    assert rows(table, "dev") == [first, ("what cities are in utah ?", first[1].replace("new mexico", "utah"))]
    assert rows(table, "train") == rows(table, "dev")
    assert rows(table, "test") == [("how many states", "SELECT COUNT ( * ) FROM STATE")]
    by_question = parse_geoquery(ENTRIES, "logic", "question", "<geo>")
    assert rows(by_question, "train") == [("cities in new mexico", "( A , _city ( A , new mexico ) )"),
                                          ("how many states", "( A , _count ( A ) )")]
    assert [x for x, _ in rows(by_question, "test")] == ["what cities are in utah ?"]
    assert rows(by_question, "dev") == []


@pytest.mark.parametrize("broken, message", [
    ({"sql": [], "query-split": "1", "sentences": []}, "entry 0"),
    ({"sql": ["SELECT 1"], "query-split": "1", "sentences": [{"text": "x"}]}, "entry 0"),
    ({"sql": ["SELECT 1"], "query-split": "1",
      "sentences": [{"text": "  ", "question-split": "1", "variables": {}}]}, "empty question"),
])
def test_a_malformed_entry_is_named(broken, message):
    with pytest.raises(UserError, match=message):
        parse_geoquery([broken], "sql", "query", "<geo>")


@pytest.mark.parametrize("name, sizes", [
    ("sql-query", {"train": 695, "dev": 159, "test": 182}),     # the paper: 695 train (with dev), 182 test
    ("sql-question", {"train": 598, "dev": 49, "test": 279}),
    ("logic-query", {"train": 691, "dev": 148, "test": 186}),
    ("logic-question", {"train": 598, "dev": 49, "test": 279}),
])
def test_the_four_named_sets_have_the_reference_sizes(data_dir, require_data, name, sizes):
    require_data(data_dir / "geoquery" / "geography.json")
    table = load_dataset(f"geoquery/{name}", data_dir)
    assert dict(table.group_by("split").len().iter_rows()) == sizes
    assert f"geoquery/{name}" in dataset_names(data_dir)
    # every question is lowercased; no variable name is left over
    assert not table.filter(table["x"].list.join(" ").str.contains("[A-Z]")).height
    assert not table.filter(table["y"].list.join(" ").str.contains(r"state_name\d|var\d")).height


def test_fetch_verifies_and_copies_both_files(data_dir, require_data, tmp_path):
    require_data(data_dir / "geoquery" / "geography-logic.txt")
    written = fetch("geoquery", tmp_path / "data", mirror=data_dir)
    assert sorted(p.name for p in written) == ["geography-logic.txt", "geography.json"]
    assert load_dataset("geoquery/logic-query", tmp_path / "data").height == 691 + 148 + 186
    damaged = tmp_path / "mirror" / "geoquery"
    damaged.mkdir(parents=True)
    for p in written:
        (damaged / p.name).write_bytes(p.read_bytes())
    text = json.loads((damaged / "geography.json").read_text())
    text[0]["sql"][0] += " "
    (damaged / "geography.json").write_text(json.dumps(text))
    with pytest.raises(UserError, match="checksum mismatch"):
        fetch("geoquery", tmp_path / "other", mirror=tmp_path / "mirror")
    assert not (tmp_path / "other" / "geoquery").exists()


def test_geoquery_uses_the_papers_geca_preset_and_its_own_dev_split():
    cfg = make_config(None, {"seed": 3}, "geoquery/sql-query")
    semparse = load_preset("semparse")
    assert (cfg.wug_limit, cfg.wug_size, cfg.wug_count, cfg.n_sample) == (
        semparse["wug_limit"], semparse["wug_size"], semparse["wug_count"], semparse["n_sample"]) == (50, 4, 3, 2000)
    assert cfg.seed == 3
    # the logical-form scripts keep the reference's defaults: 2 spans, 1,000 examples
    logic = make_config(None, {"seed": 3}, "geoquery/logic-question")
    assert (logic.wug_limit, logic.wug_size, logic.wug_count, logic.n_sample) == (50, 4, 2, 1000)
    assert keeps_own_dev("geoquery/sql-query") and not keeps_own_dev("scan/jump")


def test_the_logic_rows_run_the_reference_logic_scripts_geca(data_dir, require_data, tmp_path):
    """``geo-logic-query-geca`` writes what GECA writes with the logical-form preset, which
    is not what the SQL preset writes on the same data."""
    require_data(data_dir / "geoquery" / "geography-logic.txt")
    opts = PipelineOptions(root=tmp_path, data_dir=data_dir, log=lambda line: None)
    written = make_geca(find_run("geo-logic-query-geca"), 0, tmp_path, opts,
                        Timer(tmp_path / "timing.json"))
    for preset in ("semparse-logic", "semparse"):
        augment_file("geoquery/logic-query", tmp_path / f"{preset}.tsv",
                     make_config(preset, {"seed": 0}), data_dir=data_dir)
    rows = written.read_text()
    assert rows == (tmp_path / "semparse-logic.tsv").read_text()
    assert rows != (tmp_path / "semparse.tsv").read_text()
    assert find_run("geo-sql-query-geca").geca_preset == "semparse"


def test_an_edited_copy_in_the_data_folder_is_refused(data_dir, require_data, tmp_path):
    require_data(data_dir / "geoquery" / "geography.json")
    fetch("geoquery", tmp_path, mirror=data_dir)
    path = tmp_path / "geoquery" / "geography.json"
    path.write_text(path.read_text().replace("arizona", "arizonaa", 1))
    with pytest.raises(UserError, match="does not match the sha256"):
        load_dataset("geoquery/sql-query", tmp_path)


def test_a_file_put_in_the_data_folder_by_hand_is_read_as_it_is(data_dir, require_data, tmp_path):
    require_data(data_dir / "geoquery" / "geography.json")
    (tmp_path / "geoquery").mkdir()
    entries = json.loads((data_dir / "geoquery" / "geography.json").read_text())[:20]
    (tmp_path / "geoquery" / "geography.json").write_text(json.dumps(entries))
    table = load_dataset("geoquery/sql-query", tmp_path)
    assert table.height == sum(len(e["sentences"]) for e in entries) + table.filter(
        table["split"] == "dev").height


def test_a_fifo_in_place_of_the_file_is_refused_without_reading_it(tmp_path):
    import os

    (tmp_path / "geoquery").mkdir()
    os.mkfifo(tmp_path / "geoquery" / "geography.json")
    with pytest.raises(UserError, match="not a regular file"):
        load_dataset("geoquery/sql-query", tmp_path)
