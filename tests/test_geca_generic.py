"""GECA's generic preset, the default for a data file or folder: on the shipped numbers set
(a held-out primitive, as SCAN's jump split) it writes most of the numbers training lacks,
where the reference's count of fragments tried per template finds almost none; what
``novel_variants`` keeps per template; the papers' presets keep the reference's count."""

import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from compgen.augment.geca import GecaConfig, geca_augment, load_training, make_config
from compgen.data.table import make_table

NUMBERS = Path(__file__).resolve().parent / "data" / "numbers"
sys.path.insert(0, str(NUMBERS))
from number_words import is_correct


def pairs(result) -> list[tuple[str, str]]:
    return [(" ".join(x), " ".join(y)) for x, y in zip(result.table["x"].to_list(),
                                                       result.table["y"].to_list())]


def test_a_folder_gets_the_generic_preset_and_the_papers_presets_count_tries():
    folder = str(NUMBERS / "tsv")
    cfg = make_config(None, data=folder)
    assert cfg == make_config("generic")
    assert cfg.novel_variants and (cfg.wug_size, cfg.wug_count, cfg.variants) == (1, 2, 2)
    assert cfg.novel_tries is not None and cfg.novel_tries > cfg.variants
    for preset in ("scan", "lm", "lm-na", "semparse", "semparse-logic"):
        assert not make_config(preset).novel_variants, preset
    assert not make_config(None, data="scan/jump").novel_variants
    assert not make_config("generic", {"novel_variants": False}).novel_variants


def test_the_default_on_the_numbers_set_writes_most_held_out_numbers():
    """Training lacks every number with a 9 but four; the default's rows that the set's
    oracle accepts cover more than half of the numbers training lacks, the reference's
    count of tries (same preset otherwise) less than half."""
    folder = str(NUMBERS / "tsv")
    train = load_training(folder)
    held_out = 999 - train.height          # numbers 1..999 that training lacks
    cfg = make_config(None, data=folder)
    result = geca_augment(train, cfg)
    correct = {pair for pair in pairs(result) if is_correct(*pair)}
    tried = geca_augment(train, replace(cfg, novel_variants=False))
    tried_correct = {pair for pair in pairs(tried) if is_correct(*pair)}
    assert len(tried_correct) < held_out / 2 < len(correct)
    seen = {" ".join(x) for x in train["x"].to_list()}
    assert not {x for x, _ in pairs(result)} & seen


def grid(missing_rows: int = 9) -> list[tuple[list[str], list[str]]]:
    """p_i q_j -> P_i Q_j, training holding row 0 and column 0 of a 10 x 10 grid: every
    template p_i WUG0 / WUG0 q_j of the other rows and columns has 9 novel candidates."""
    rows = [(f"p{i} q0", f"P{i} Q0") for i in range(10)]
    rows += [(f"p0 q{j}", f"P0 Q{j}") for j in range(1, missing_rows + 1)]
    return [(x.split(), y.split()) for x, y in rows]


def test_novel_variants_keeps_at_most_variants_novel_rows_per_template():
    data = grid()
    table = make_table([x for x, _ in data], [y for _, y in data], "train")
    base = GecaConfig(wug_size=1, wug_count=2, dedup=True, novel_variants=True, n_sample=None)
    every = geca_augment(table, replace(base, variants=None))
    assert len(pairs(every)) == 81       # the grid's 100 cells less the 19 trained on
    reference = geca_augment(table, replace(base, variants=None, novel_variants=False))
    assert set(pairs(every)) == set(pairs(reference))
    two = geca_augment(table, replace(base, variants=2))
    per_template = Counter(two.templates)
    assert max(per_template.values()) == 2 and len(pairs(two)) == sum(per_template.values())
    assert set(pairs(two)) < set(pairs(every))
    assert pairs(geca_augment(table, replace(base, variants=2))) == pairs(two)
    other = geca_augment(table, replace(base, variants=2, seed=1))
    assert set(pairs(other)) != set(pairs(two))
    capped = geca_augment(table, replace(base, variants=2, n_sample=5))
    assert pairs(capped) == pairs(two)[:5]


def test_novel_tries_bounds_the_proposals_per_template():
    """A template has 9 distinct candidates here: novel_tries 3 proposes 3 of them (a
    seeded run of its list), 9 or more propose all 9."""
    data = grid()
    table = make_table([x for x, _ in data], [y for _, y in data], "train")
    base = GecaConfig(wug_size=1, wug_count=2, dedup=True, novel_variants=True, n_sample=None,
                      variants=None)
    every = geca_augment(table, base)
    assert geca_augment(table, replace(base, novel_tries=9)).stats["proposals"] == \
        every.stats["proposals"]
    three = geca_augment(table, replace(base, novel_tries=3))
    assert three.stats["proposals"] == every.stats["proposals"] // 3
    per_template = Counter(three.templates)
    assert max(per_template.values()) <= 3 and set(pairs(three)) < set(pairs(every))
