"""GECA: semantics on toy corpora, equality with a direct transcription of the definition
on real-data subsets, the SCAN jump figures, determinism, options and CLI errors."""

import random
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from compgen.augment.geca import (
    GecaConfig,
    augment_file,
    geca_augment,
    load_training,
    make_config,
    reference_holdout,
)
from compgen.cli.common import flag_of
from compgen.data.scan import load_scan_grammar, read_scan_file, scan_sample_report
from compgen.data.table import make_table
from compgen.errors import SettingError, UserError

sys.path.insert(0, str(Path(__file__).parent))
from geca_direct import direct_fragments, direct_geca

ROOT = Path(__file__).resolve().parents[1]
ALL = {"variants": None, "n_sample": None}


def lm_table(sentences):
    return make_table([[] for _ in sentences], [s.split() for s in sentences], "train")


def outputs(result):
    return {(" ".join(x), " ".join(y)) for x, y in zip(result.table["x"].to_list(),
                                                       result.table["y"].to_list())}


def lm_outputs(result):
    return {" ".join(y) for y in result.table["y"].to_list()}


TOY = ["the cat sang", "the wug sang", "the cat daxed"]


def test_paper_toy_corpus():
    for sim in ("none", "window"):
        cfg = GecaConfig(wug_size=1, wug_count=1, output_only=True, template_sim=sim, **ALL)
        got = lm_outputs(geca_augment(lm_table(TOY), cfg))
        assert "the wug daxed" in got
        assert "the sang daxed" not in got
        assert not got & set(TOY)


def test_discontinuous_fragment_fills_both_holes():
    corpus = ["she picks the wug up", "she puts the wug down", "he picks a cat up"]
    cfg = GecaConfig(wug_size=1, wug_count=2, output_only=True, **ALL)
    result = geca_augment(lm_table(corpus), cfg)
    got = lm_outputs(result)
    assert "he puts a cat down" in got
    assert "he puts a cat up" not in got and "he picks a cat down" not in got
    i = [" ".join(y) for y in result.table["y"].to_list()].index("he puts a cat down")
    assert result.fragments[i] == "puts | down"
    assert result.templates[i][1] == "he WUG0 a cat WUG1"


def test_conditional_pairs_split_back_and_replace_on_both_sides():
    pairs = [("jump twice", "JUMP JUMP"), ("walk twice", "WALK WALK"), ("walk", "WALK"),
             ("look", "LOOK")]
    table = make_table([x.split() for x, _ in pairs], [y.split() for _, y in pairs], "train")
    got = outputs(geca_augment(table, GecaConfig(wug_size=1, wug_count=2, **ALL)))
    assert ("look twice", "LOOK LOOK") in got
    assert ("jump", "JUMP") in got
    assert all(len(x.split()) in (1, 2) and "##" not in x + y for x, y in got)


def test_wug_limit_is_an_inclusive_upper_bound():
    # counts: the 3, cat 2, sang 2, wug 1, daxed 1
    base = {"wug_size": 1, "wug_count": 1, "output_only": True, **ALL}
    assert lm_outputs(geca_augment(lm_table(TOY), GecaConfig(wug_limit=1, **base))) == set()
    assert "the wug daxed" in lm_outputs(geca_augment(lm_table(TOY), GecaConfig(wug_limit=2, **base)))


def test_max_comp_len_skips_with_greater_or_equal():
    base = {"wug_size": 1, "wug_count": 1, "output_only": True, **ALL}   # 0 + 1 + 3 = 4 words
    assert lm_outputs(geca_augment(lm_table(TOY), GecaConfig(max_comp_len=4, **base))) == set()
    assert "the wug daxed" in lm_outputs(geca_augment(lm_table(TOY), GecaConfig(max_comp_len=5, **base)))


def test_output_only_ignores_the_input_side():
    x = [["a"], ["a"], ["a"]]
    table = make_table(x, [s.split() for s in TOY], "train")
    base = {"wug_size": 1, "wug_count": 1, **ALL}
    # the hole is only in the output and the input "a" is a training input: rejected ...
    assert outputs(geca_augment(table, GecaConfig(**base))) == set()
    # ... unless only the output side counts
    assert ("a", "the wug daxed") in outputs(geca_augment(table, GecaConfig(output_only=True, **base)))


def test_window_environment():
    corpus = ["x cat y", "x dog y", "m x cow y n"]
    base = {"wug_size": 1, "wug_count": 1, "output_only": True, **ALL}
    window1 = lm_outputs(geca_augment(lm_table(corpus), GecaConfig(template_sim="window", sim_window_size=1, **base)))
    assert {"m x cat y n", "m x dog y n"} <= window1
    # the whole template or a wider window is not shared with "x W y": nothing for "m x _ y n"
    for cfg in (GecaConfig(template_sim="none", **base),
                GecaConfig(template_sim="window", sim_window_size=2, **base)):
        assert not any(s.startswith("m x") for s in lm_outputs(geca_augment(lm_table(corpus), cfg)))


def _subset(name, n, offset):
    """n shuffled examples; for COGS, n examples of similar length (sorted by length from
    ``offset``) so that templates are shared within the small sample."""
    table = load_training(name)
    rows = list(zip(table["x"].to_list(), table["y"].to_list()))
    random.Random(0).shuffle(rows)
    if offset is not None:
        rows.sort(key=lambda r: len(r[0]) + len(r[1]))
        rows = rows[offset:]
    return rows[:n]


@pytest.mark.parametrize("name,n,offset,options", [
    ("scan/jump", 300, None, {"wug_size": 1, "wug_count": 2, "max_comp_len": 40}),
    ("scan/around_right", 60, None, {"wug_size": 2, "wug_count": 3}),
    ("cogs", 400, 3000, {"wug_size": 3, "wug_count": 3, "wug_limit": 8}),
    ("cogs", 300, 0, {"wug_size": 2, "wug_count": 3, "wug_limit": 10}),
    ("lm/kin", 400, None, {"wug_size": 2, "wug_count": 1, "wug_limit": 20, "template_sim": "window",
                               "sim_window_size": 2, "output_only": True, "max_comp_len": 100}),
    ("lm/na", 150, None, {"wug_size": 2, "wug_count": 2, "wug_limit": 4, "template_sim": "window",
                              "sim_window_size": 1, "output_only": True}),
])
def test_same_set_as_the_direct_definition(data_dir, name, n, offset, options):
    rows = _subset(name, n, offset)
    table = make_table([x for x, _ in rows], [y for _, y in rows], "train")
    got = outputs(geca_augment(table, GecaConfig(**options, **ALL)))
    want = direct_geca(rows, options["wug_size"], options["wug_count"], options.get("wug_limit"),
                       options.get("max_comp_len"), options.get("template_sim", "none"),
                       options.get("sim_window_size", 2), options.get("output_only", False))
    want = {(" ".join(x), " ".join(y)) for x, y in want}
    assert got == want
    assert len(want) > 0


def test_scan_reference_split_reproduces_reference_training_set(data_dir, reference_dir):
    held = reference_holdout(load_training("scan/jump").select("x", "y"), 640, 0)
    mine = set(zip(map(tuple, held["x"].to_list()), map(tuple, held["y"].to_list())))
    ref = read_scan_file(reference_dir / "geca-inputs" / "scan_jump.txt")
    assert mine == set(zip(map(tuple, ref["x"].to_list()), map(tuple, ref["y"].to_list())))


def test_scan_jump_figures(data_dir, reference_dir):
    cfg = replace(make_config("scan", data="scan/jump"), n_sample=None)
    assert cfg.holdout == 640 and cfg.dedup
    result = geca_augment(load_training("scan/jump"), cfg)
    n = result.table.height
    assert 1900 <= n <= 2100          # the reference (HEAD) exhausts at 2006 for seed 0
    pairs = list(zip(result.table["x"].to_list(), result.table["y"].to_list()))
    report = scan_sample_report(pairs, result.train, load_scan_grammar(data_dir))
    assert report["total"] == n and report["novel"] == n
    assert report["uses_primitive_in_new_command_share"] >= 0.95
    assert report["correct"] == n
    capped = geca_augment(load_training("scan/jump"), make_config("scan", {}, data="scan/jump"))
    assert capped.table.height == 1000


def test_same_seed_same_file(tmp_path):
    files = []
    for i, seed in enumerate((3, 3, 4)):
        path = tmp_path / f"out{i}.tsv"
        augment_file("lm/tok", path, make_config("lm", {"seed": seed}), concat=True)
        files.append(path.read_bytes())
    assert files[0] == files[1]
    assert files[0] != files[2]
    n_train = load_training("lm/tok").height
    assert len(files[0].splitlines()) > n_train


def test_bad_options_raise():
    with pytest.raises(SettingError, match="^wug_size ") as refused:
        geca_augment(lm_table(TOY), GecaConfig(wug_size=0))
    assert refused.value.text(flag_of).startswith("--wug-size ")
    with pytest.raises(SettingError, match="^wug_count "):
        geca_augment(lm_table(TOY), GecaConfig(wug_count=4))
    with pytest.raises(UserError, match="no training examples"):
        geca_augment(lm_table([]).head(0), GecaConfig())


def test_cli_errors_are_one_line_exit_2(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n")
    compgen = str(ROOT / ".venv" / "bin" / "compgen")
    cases = [(["lm/tok", "--preset", "lm", "--wug-size", "-1"], "--wug-size"),
             (["lm/tok", "--preset", "lm", "--sim-window-size", "99"], "--sim-window-size"),
             ([str(empty), "--preset", "lm"], "empty")]
    for args, needle in cases:
        out = tmp_path / "o.tsv"
        proc = subprocess.run([compgen, "augment", "geca", *args, "-o", str(out)],
                              check=False, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0]
        assert not out.exists()


def test_third_span_start_quirk_is_reproduced_and_can_be_turned_off():
    # "c" follows the second span "p q", which also occurs before "a": the reference's
    # depth-2 scan starts past it in the twice-rewritten sequence and misses "c"
    table = lm_table(["p q a p q c"])
    base = {"wug_size": 2, "wug_count": 3, "output_only": True, **ALL}
    quirk = geca_augment(table, GecaConfig(**base)).stats["instances"]
    fixed = geca_augment(table, GecaConfig(reference_offsets=False, **base)).stats["instances"]
    assert quirk == len(direct_fragments([], ["p", "q", "a", "p", "q", "c"], 2, 3))
    assert fixed > quirk


def test_scan_sample_report_counts(data_dir):
    grammar = load_scan_grammar(data_dir)
    train = make_table([["jump"], ["walk", "twice"]], [["I_JUMP"], ["I_WALK", "I_WALK"]], "train")
    pairs = [(["jump"], ["I_JUMP"]),                               # in training, correct
             (["jump", "twice"], ["I_JUMP", "I_JUMP"]),            # new, uses jump, correct
             (["walk", "thrice"], ["I_WALK", "I_WALK"]),           # new, wrong
             (["jump", "left"], ["I_TURN_LEFT", "I_JUMP"])]        # new, uses jump, correct
    report = scan_sample_report(pairs, train, grammar)
    assert report["total"] == 4 and report["novel"] == 3
    assert report["uses_primitive_in_new_command"] == 2
    assert report["correct"] == 3 and report["correct_share"] == 0.75
