"""Seed rules: IBM Model 1 and the COGS ``inflected word ### lemma`` rules."""

from pathlib import Path

from compgen.augment.csl.cogs_lf import lemma_table, to_variable_free
from compgen.augment.csl.rules import Rule
from compgen.augment.csl.seed_rules import cogs_seed_rules, ibm1_translation

TOY = [("the dog ran", "run ( agent = * dog )"), ("a cat ran", "run ( agent = cat )"),
       ("the dog slept", "sleep ( agent = * dog )"), ("Emma slept", "sleep ( agent = Emma )"),
       ("Emma ran", "run ( agent = Emma )"), ("a dog slept", "sleep ( agent = dog )"),
       ("the cat rolled", "roll ( agent = * cat )"), ("Emma rolled", "roll ( agent = Emma )")]
PAIRS = [(x.split(), y.split()) for x, y in TOY]


def test_ibm1_aligns_each_verb_form_to_its_lemma():
    src, tgt, table = ibm1_translation(PAIRS)
    best = {w: tgt[table[i].argmax()] for i, w in enumerate(src)}
    assert best["ran"] == "run" and best["slept"] == "sleep" and best["rolled"] == "roll"
    assert best["Emma"] == "Emma" and best["cat"] == "cat"
    assert (table.sum(1) > 0.999).all() and (table.sum(1) < 1.001).all()


def test_seeds_are_the_inflected_verb_forms_only():
    assert cogs_seed_rules(PAIRS) == [Rule(("ran",), ("run",), 0), Rule(("rolled",), ("roll",), 0),
                                      Rule(("slept",), ("sleep",), 0)]


def test_cogs_seeds_equal_the_inflections_read_off_the_logical_forms(data_dir: Path, require_data):
    rows = [r.split("\t") for r in require_data(data_dir / "cogs" / "train.tsv").read_text().splitlines()
            if r.strip()]
    seeds = {r.source[0]: r.target[0] for r in
             cogs_seed_rules([(r[0].split(), to_variable_free(r[0].split(), r[1]).split()) for r in rows])}
    inflected = {w: lemma for w, lemma in lemma_table([(r[0].split(), r[1]) for r in rows]).items()
                 if w != lemma}
    assert len(inflected) == 140  # the paper's seed list has 140 rules
    assert {w: seeds.get(w) for w in inflected} == inflected
    # beyond the verbs, only case variants of one noun may be aligned (TV -> tv)
    assert all(seeds[w] == w.lower() for w in set(seeds) - set(inflected))
