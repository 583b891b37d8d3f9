"""The CSL presets are TOML files (compgen/configs/csl_*.toml), read strictly: the values
the reference runs use, and one error naming the file and the key for anything else."""

import pytest

from compgen.augment.csl.presets import CSL_PRESETS, preset, read_csl_preset
from compgen.errors import UserError
from compgen.evaluation.inspection import PRESET_DIR, preset_table


def test_each_preset_holds_the_reference_settings():
    scan, cogs, generic = (preset(name) for name in ("scan", "cogs", "generic"))
    assert (scan.induction.max_num_nts, scan.model.num_types, scan.sampler.max_recursions) == (2, 4, 5)
    assert (generic.induction.max_num_nts, generic.model.num_types) == (3, 4)
    assert (cogs.induction.max_num_nts, cogs.induction.num_partitions, cogs.model.num_types,
            cogs.model.training_steps, cogs.sampler.nonterminal_bias) == (4, 1, 64, 3000, 6.0)
    assert isinstance(scan.induction.terminal_coef, float)   # an integer-valued float stays float


def test_every_preset_is_listed_with_what_it_is_for():
    rows = {row["name"]: row for row in preset_table()}
    for name in CSL_PRESETS:
        assert (PRESET_DIR / f"csl_{name}.toml").is_file()
        assert rows[f"csl_{name}"]["kind"] == "csl"
        assert rows[f"csl_{name}"]["about"].startswith("CSL ")


def _text(**replace: str) -> str:
    text = (PRESET_DIR / "csl_scan.toml").read_text()
    for old, new in replace.items():
        assert old in text
        text = text.replace(old, new)
    return text


@pytest.mark.parametrize("text, message", [
    (_text(max_recursions="max_recursion"), r"mine\.toml \[sampler\]: unknown option 'max_recursion'"),
    (_text(num_types="num_type"), r"mine\.toml \[model\]: unknown option 'num_type'"),
    (_text(**{"[sampler]": "[sampling]"}), r"mine\.toml: unknown key 'sampling'"),
    (_text(**{"max_num_nts = 2": "max_num_nts = 2.5"}), r"mine\.toml \[induction\]: option 'max_num_nts' must be an integer"),
    (_text(**{'kind = "csl"': 'kind = "geca"'}), r"mine\.toml: kind must be \"csl\""),
    ("kind = 'csl'\n[induction\n", r"mine\.toml: not valid TOML"),
])
def test_a_preset_with_an_unknown_key_or_a_wrong_value_is_one_error_naming_it(text, message):
    with pytest.raises(UserError, match=message):
        read_csl_preset(text, "mine.toml")


def test_an_unknown_preset_lists_the_valid_ones():
    with pytest.raises(UserError, match=r"unknown CSL config 'sacn' \(valid: scan, cogs, generic\)"):
        preset("sacn")
