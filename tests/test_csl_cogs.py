"""COGS logical forms <-> the variable-free form (both directions)."""

from pathlib import Path

import pytest

from compgen.augment.csl.cogs_lf import (
    check_round_trip,
    from_variable_free,
    lemma_table,
    to_variable_free,
)

GAVE = ("Camila gave a cake in a storage to Emma .",
        ("give . agent ( x _ 1 , Camila ) AND give . theme ( x _ 1 , x _ 3 ) AND give . recipient "
         "( x _ 1 , Emma ) AND cake ( x _ 3 ) AND cake . nmod . in ( x _ 3 , x _ 6 ) AND storage ( x _ 6 )"),
        "give ( agent = Camila , theme = cake ( nmod . in = storage ) , recipient = Emma )")
NEEDED = ("The girl needed to cook .",
          ("* girl ( x _ 1 ) ; need . agent ( x _ 2 , x _ 1 ) AND need . xcomp ( x _ 2 , x _ 4 ) AND "
           "cook . agent ( x _ 4 , x _ 1 )"),
          "need ( agent = * girl , xcomp = cook ( agent = * girl ) )")
PASSIVE = ("A rose was helped by a dog .",
           "rose ( x _ 1 ) AND help . theme ( x _ 3 , x _ 1 ) AND help . agent ( x _ 3 , x _ 6 ) AND dog ( x _ 6 )",
           "help ( theme = rose , agent = dog )")


@pytest.mark.parametrize("sentence, lf, free", [GAVE, NEEDED, PASSIVE])
def test_examples_both_ways(sentence, lf, free):
    words = sentence.split()
    assert to_variable_free(words, lf) == free
    lemmas = lemma_table([(GAVE[0].split(), GAVE[1]), (NEEDED[0].split(), NEEDED[1]),
                          (PASSIVE[0].split(), PASSIVE[1])])
    assert lemmas["gave"] == "give" and lemmas["needed"] == "need"
    assert from_variable_free(words, free, lemmas) == lf


def test_primitives_become_the_word():
    assert to_variable_free(["touch"], "LAMBDA a . LAMBDA e . touch . theme ( e , a )") == "touch"
    assert to_variable_free(["Layla"], "Layla") == "Layla"


def test_bad_targets_raise():
    words = ["The", "cat", "ran", "."]
    assert from_variable_free(words, "run ( agent = * cat )", {"ran": "run"}) == (
        "* cat ( x _ 1 ) ; run . agent ( x _ 2 , x _ 1 )")
    for bad in ("run ( agent = * dog )", "run ( agent = * cat", "run ( agent * cat )", "run ) x"):
        with pytest.raises(ValueError):
            from_variable_free(words, bad, {"ran": "run"})


def test_samples_keep_only_logical_forms_that_read_back():
    """A sampled target that uses a word more often than its sentence has it gets colliding
    variables; such a sample is dropped, as are one-word targets."""
    from compgen.augment.csl.dataset import _logical_forms

    lemmas = {"ate": "eat", "gave": "give", "needed": "need", "cooked": "cook"}
    samples = [(sentence.split(), free.split()) for sentence, free in [
        (GAVE[0], GAVE[2]), (NEEDED[0], NEEDED[2]), ("Emma ate .", "eat ( agent = eat ( agent = Emma ) )"),
        ("cake", "cake")]]
    assert from_variable_free(samples[2][0], " ".join(samples[2][1]), lemmas) == "eat . agent ( x _ 1 , x _ 1 )"
    kept = _logical_forms(samples, lemmas)
    assert kept == [(GAVE[0].split(), GAVE[1].replace(" _ ", "_").split()),
                    (NEEDED[0].split(), NEEDED[1].replace(" _ ", "_").split())]


def test_round_trip_on_every_cogs_line(data_dir: Path):
    def read(name):
        rows = (data_dir / "cogs" / f"{name}.tsv").read_text().splitlines()
        return [(r.split("\t")[0].split(), r.split("\t")[1]) for r in rows if r.strip()]

    train = read("train")
    lemmas = lemma_table(train)
    for name in ("train", "dev", "test"):
        total, same = check_round_trip(read(name), lemmas)
        assert total > 2900 and same == total, name


# ---- target CFG -------------------------------------------------------------------------

def test_target_cfg_file_round_trip_and_errors(tmp_path: Path):
    from compgen.augment.csl.target_cfg import cogs_target_cfg, read_target_cfg, write_target_cfg
    from compgen.errors import UserError

    rules = cogs_target_cfg([GAVE[2].split(), NEEDED[2].split()])
    path = tmp_path / "cfg.txt"
    write_target_cfg(path, rules, header="COGS")
    assert read_target_cfg(path) == rules
    assert {str(r) for r in rules} >= {"NAME => give", "NAME => Camila", "KEY => nmod . ##PREP"}
    for text, fragment in [("ROOT -> ##FUNC\n", ":1: expected"), ("ROOT => a => b\n", ":1: expected"),
                           ("ROOT => ##FUNC\n", "##FUNC is used"), ("FUNC => x\n", "ROOT")]:
        path.write_text(text)
        with pytest.raises(UserError, match=fragment):
            read_target_cfg(path)


def test_target_checker_on_cogs(data_dir: Path):
    from compgen.augment.csl.target_cfg import TargetChecker, cogs_target_cfg

    rows = (data_dir / "cogs" / "train.tsv").read_text().splitlines()[:400]
    targets = [to_variable_free(r.split("\t")[0].split(), r.split("\t")[1]).split() for r in rows]
    checker = TargetChecker(cogs_target_cfg(targets))
    assert all(checker.can_parse(t) for t in targets)
    for good in ["give ( agent = NT_1 , theme = NT_2 )", "NT_1 ( nmod . in = NT_2 )", "* NT_1",
                 "theme = NT_1", "NT_1 , NT_2"]:
        assert checker.can_parse(good.split()), good
    for bad in ["give ( agent = )", "give ( agent NT_1 )", "( NT_1", "blorp", "NT_1 nmod", ""]:
        assert not checker.can_parse(bad.split()), bad


def test_csl_on_cogs_end_to_end(tmp_path: Path, data_dir: Path, require_data):
    """Seed rules kept, every sample a COGS logical form whose variable-free target the
    target CFG derives from ROOT, and the round trip through the variable-free form exact."""
    from compgen.augment.csl.dataset import csl_augment_dataset
    from compgen.augment.csl.rules import read_grammar
    from compgen.augment.csl.run import derivable_share
    from compgen.augment.csl.seed_rules import cogs_seed_rules
    from compgen.augment.csl.target_cfg import TargetChecker, cogs_target_cfg

    (tmp_path / "cogs").mkdir()
    lines = {}
    for split in ("train", "dev", "test"):
        text = require_data(data_dir / "cogs" / f"{split}.tsv").read_text().splitlines()[:300]
        lines[split] = [r.split("\t") for r in text]
        (tmp_path / "cogs" / f"{split}.tsv").write_text("\n".join(text) + "\n")
    done = csl_augment_dataset("cogs", tmp_path / "s.tsv", n=200, steps=20, states=4, seed=3,
                               grammar_out=tmp_path / "g.txt", data_dir=tmp_path)
    train = [(r[0].split(), to_variable_free(r[0].split(), r[1]).split()) for r in lines["train"]]
    seeds = cogs_seed_rules(train)
    grammar = read_grammar(tmp_path / "g.txt")
    assert seeds and set(seeds) <= set(grammar)
    dev = [(r[0].split(), to_variable_free(r[0].split(), r[1]).split()) for r in lines["dev"]]
    assert done.result.summary["dev_pairs"] == 300
    assert done.result.summary["dev_coverage"] == derivable_share(grammar, dev, max_unary=1)
    assert done.result.summary["seed_rules"] == len(seeds)
    assert done.rows == len(done.result.samples) == 200 - done.result.summary[
        "samples_without_a_logical_form"] > 150
    checker = TargetChecker(cogs_target_cfg([y for _, y in train]))
    lemmas = lemma_table([(r[0].split(), r[1]) for r in lines["train"]])
    rows = [line.split("\t") for line in (tmp_path / "s.tsv").read_text().splitlines()
            if line and not line.startswith("#")]
    assert len(rows) == done.rows
    for sentence, lf in rows:
        words = sentence.split()
        free = to_variable_free(words, lf)
        assert "ROOT" in checker.spanning_categories(free.split()), (sentence, free)
        assert from_variable_free(words, free, lemmas).replace(" _ ", "_") == lf
