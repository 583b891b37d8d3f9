"""The one place that says what a data name stands for (compgen/data/task.py)."""

import re
from pathlib import Path

import pytest

from compgen.data import dataset_names, is_named_dataset
from compgen.data.task import FAMILIES, task_of

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("name", [n for n in dataset_names(Path(__file__).parent) if "<" not in n])
def test_every_listed_name_is_a_named_task_of_its_family(name):
    task = task_of(name)
    assert task.named and is_named_dataset(name)
    assert task.family == name.split("/")[0] and task.family in FAMILIES


def test_paths_are_own_data_with_the_generic_recipes(tmp_path):
    for data in ["pairs.tsv", str(tmp_path / "folder"), "scan", "geoquery", "my/scan/jump"]:
        task = task_of(data)
        assert not task.named and task.family == "own", data
        assert task.generator_recipe == "generic" and task.keeps_own_dev
        assert task.default_preset("generator") == "recombine_generic_cpu"
        assert task.geca_preset() == "generic" and task.csl_preset() == "generic"


def test_the_recipes_of_each_family():
    assert task_of("scan/jump").split == "jump" and task_of("scan/jump").scan
    assert task_of("sigmorphon/spa/hints-4.0").split == "spa/hints-4.0"
    assert task_of("sigmorphon/spa").generator_recipe == "sig"
    assert task_of("sigmorphon/spa").default_preset("predictor") == "seq2seq_sig_cpu"
    assert task_of("scan/jump").default_preset("generator") == "recombine_scan_cpu"
    assert task_of("geoquery/sql-query").default_preset("predictor") == "seq2seq_geo"
    assert task_of("geoquery/sql-query").geca_preset() == "semparse"
    assert task_of("geoquery/sql-question").geca_preset() == "semparse"
    assert task_of("geoquery/logic-query").geca_preset() == "semparse-logic"
    assert task_of("geoquery/sql-query").keeps_own_dev
    assert not task_of("scan/jump").keeps_own_dev and not task_of("cogs").keeps_own_dev
    assert task_of("cogs").csl_preset() == "cogs" and task_of("scan/simple").csl_preset() == "scan"
    assert task_of("lm/kin").generator_recipe == "generic"


def test_no_module_but_the_task_tests_a_data_name_by_its_prefix():
    prefix_test = re.compile(r"""startswith\(\(?["'](scan|sigmorphon|lm|cogs|geoquery)\b""")
    found = [f"{path.relative_to(ROOT)}:{n}"
             for path in sorted((ROOT / "compgen").rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if prefix_test.search(line) and path.name != "task.py"]
    assert found == []
