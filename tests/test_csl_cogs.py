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


def test_round_trip_on_every_cogs_line(data_dir: Path):
    def read(name):
        rows = (data_dir / "cogs" / f"{name}.tsv").read_text().splitlines()
        return [(r.split("\t")[0].split(), r.split("\t")[1]) for r in rows if r.strip()]

    train = read("train")
    lemmas = lemma_table(train)
    for name in ("train", "dev", "test"):
        total, same = check_round_trip(read(name), lemmas)
        assert total > 2900 and same == total, name
