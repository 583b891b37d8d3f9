"""STEM-CORRUPT: the CRP aligner's stems on hand-made pairs, the substitution, the pool."""

import random
import subprocess
import sys
import unicodedata

import pytest

from compgen.augment.stem_corrupt import (
    AlignerConfig,
    CrpAligner,
    StemCorruptConfig,
    corrupt_pair,
    read_triples,
    stem_corrupt_pool,
    stem_ranges,
    training_alphabet,
)
from compgen.augment.stem_corrupt.graphemes import graphemes, is_letter_cluster
from compgen.cli.common import flag_of
from compgen.errors import SettingError, UserError

SUFFIX = [("walk", "walked"), ("talk", "talked"), ("jump", "jumped"), ("play", "played"),
          ("kick", "kicked"), ("cook", "cooked"), ("look", "looked"), ("pull", "pulled"),
          ("fill", "filled"), ("wash", "washed")]
CIRCUMFIX = [("machen", "gemacht"), ("sagen", "gesagt"), ("kaufen", "gekauft"),
             ("fragen", "gefragt"), ("holen", "geholt")]
IDENTICAL = [("fish", "fish"), ("bison", "bison")]
STEM_CHANGE = [("sprechen", "sprach"), ("brechen", "brach"), ("stechen", "stach")]
PAIRS = SUFFIX + CIRCUMFIX + IDENTICAL + STEM_CHANGE


def stems(aligned):
    return [[a[s:e] for s, e in stem_ranges(a, b)] for a, b in aligned]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_aligner_finds_the_stems_of_hand_made_pairs(seed):
    found = dict(zip(PAIRS, stems(CrpAligner(seed=seed).align(PAIRS)), strict=True))
    for lemma, form in SUFFIX:
        assert found[(lemma, form)] == [lemma]
    for (lemma, form), stem in zip(CIRCUMFIX, ["mach", "sag", "kauf", "frag", "hol"], strict=True):
        assert found[(lemma, form)] == [stem]
    for pair in IDENTICAL:
        assert found[pair] == [pair[0]]
    assert found[("sprechen", "sprach")] == ["spr"]


def test_aligned_strings_spell_the_pairs():
    for (lemma, form), (a, b) in zip(PAIRS, CrpAligner(seed=3).align(PAIRS), strict=True):
        assert len(a) == len(b)
        assert a.replace(" ", "") == lemma and b.replace(" ", "") == form
        assert not any(x == " " and y == " " for x, y in zip(a, b, strict=True))


def test_aligner_is_seeded():
    assert CrpAligner(seed=5).align(PAIRS) == CrpAligner(seed=5).align(PAIRS)


def test_compat_mode_carries_counts_over_calls():
    aligner = CrpAligner(AlignerConfig(compat=True))
    aligner.align(PAIRS)
    total_after_one = int(aligner._stats[0])
    aligner.align(PAIRS)
    assert aligner._stats[0] > total_after_one   # N grows: never decremented, never cleared
    paper = CrpAligner(seed=0)
    paper.align(PAIRS)
    assert paper._stats[0] == sum(len(a) for a, _ in paper.align(PAIRS))


def test_stem_ranges_keep_runs_of_three_and_retry_off_by_one():
    assert stem_ranges("walk  ", "walked") == [(0, 4)]
    assert stem_ranges("ab xyz", "ab xyz") == [(3, 6)]   # 'ab' too short; ' ' is epsilon
    # no identical position: the form side is shifted right by one
    assert stem_ranges("walk", "alk ") == [(1, 4)]
    assert stem_ranges("abc", "xyz") == []


def test_substitution_touches_only_stem_characters_consistently():
    alphabet = list("xyzw")
    rng = random.Random(0)
    changed = 0
    for _ in range(200):
        out = corrupt_pair("  spi elen", "gespie lt ", alphabet, rng)
        assert out is not None
        lemma, form = out
        # the stem run 'spi' is short (<= 5): every one of its 3 characters may change
        assert len(lemma) == len("spielen") and len(form) == len("gespielt")
        assert lemma[3:] == "elen" and form[:2] == "ge" and form[5:] == "elt"
        assert lemma[:3] == form[2:5]          # same substitution in lemma and form
        assert all(c in alphabet or c == o for c, o in zip(lemma[:3], "spi", strict=True))
        changed += lemma[:3] != "spi"
    assert 150 < changed < 200   # each of 3 characters changes with p 0.5 * 3/4


def test_long_runs_keep_their_first_and_last_character():
    rng = random.Random(1)
    for _ in range(100):
        lemma, form = corrupt_pair("kavalerist i", "kavalerists ", list("@#"), rng)
        assert lemma[0] == "k" and lemma[9] == "t" and lemma[10:] == "i"
        assert form[0] == "k" and form[9] == "t" and form[10:] == "s"
        assert lemma[:10] == form[:10]


def test_a_pair_without_a_stem_gives_nothing():
    assert corrupt_pair("ab", "xy", list("q"), random.Random(0)) is None


def test_genuine_shared_spaces_are_kept():
    rng = random.Random(0)
    lemma, form = corrupt_pair("new york  ", "new yorker", list("q"), rng,
                               StemCorruptConfig(theta=0.0))
    assert (lemma, form) == ("new york", "new yorker")


def test_pool_has_the_size_the_tags_and_the_affixes(tmp_path):
    triples = [(lemma, form, "V;PST") for lemma, form in SUFFIX] + \
              [(lemma, form, "V;PTCP") for lemma, form in CIRCUMFIX]
    pool = stem_corrupt_pool(triples, StemCorruptConfig(pool_size=250, seed=0))
    assert len(pool) == 250
    assert pool == stem_corrupt_pool(triples, StemCorruptConfig(pool_size=250, seed=0))
    alphabet = set(training_alphabet(triples))
    for lemma, form, tags in pool:
        assert set(lemma + form) <= alphabet
        if tags == "V;PST":
            assert form == lemma + "ed"
        else:
            assert form.startswith("ge") and form.endswith("t") and lemma.endswith("en")
    assert len({(lemma, form) for lemma, form, _ in pool}) > 100   # corrupted, not copied


def test_pool_errors():
    with pytest.raises(UserError, match="no training pair has a stem"):
        stem_corrupt_pool([("ab", "xy", "N")], StemCorruptConfig(pool_size=5))
    with pytest.raises(SettingError, match="^pool_size ") as refused:
        StemCorruptConfig(pool_size=0).validate()
    assert refused.value.text(flag_of).startswith("--pool ")


def test_real_language_pool(data_dir, require_data):
    path = require_data(data_dir / "sigmorphon2018" / "georgian-train-low")
    triples = read_triples(path)
    pool = stem_corrupt_pool(triples, StemCorruptConfig(pool_size=1000, seed=0))
    assert len(pool) == 1000
    assert {t for _, _, t in pool} <= {t for _, _, t in triples}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "compgen", *args], capture_output=True, text=True,
                          check=False)


def test_cli_writes_a_pool_and_rejects_bad_input(tmp_path):
    good = tmp_path / "train.tsv"
    good.write_text("".join(f"{lemma}\t{form}\tV;PST\n" for lemma, form in SUFFIX), encoding="utf-8")
    out = tmp_path / "pool.tsv"
    run = _cli("augment", "stem-corrupt", str(good), "--pool", "30", "-o", str(out))
    assert run.returncode == 0, run.stderr
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 30 and all(len(r) == 3 and r[2] == "V;PST" for r in rows)
    bad = tmp_path / "bad.tsv"
    bad.write_text("walk\twalked\n", encoding="utf-8")
    for args, message in (((str(bad),), "bad.tsv:1"), (("klingon",), "unknown SIGMORPHON language"),
                          ((str(good), "--pool", "0"), "--pool")):
        run = _cli("augment", "stem-corrupt", *args, "-o", str(tmp_path / "x.tsv"))
        assert run.returncode == 2
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0]
    assert not (tmp_path / "x.tsv").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.tsv", "pool.tsv", "train.tsv"]


# ---------------------------------------------------------------- Unicode: grapheme clusters

DECOMPOSED = [(unicodedata.normalize("NFD", lemma), unicodedata.normalize("NFD", form))
              for lemma, form in [("café", "cafés"), ("naïve", "naïvement"), ("señor", "señora"),
                                  ("über", "übern"), ("résumé", "résumés")]]


def test_graphemes_keep_marks_joiners_and_hangul_with_their_base():
    assert graphemes("e\u0301te\u0301") == ["e\u0301", "t", "e\u0301"]
    assert graphemes("\u0301a") == ["\u0301", "a"]             # an orphan mark stays alone
    assert graphemes("\U0001F469\u200d\U0001F52C!") == ["\U0001F469\u200d\U0001F52C", "!"]
    assert graphemes("\u1100\u1161\u11a8x") == ["\u1100\u1161\u11a8", "x"]
    assert graphemes("\U0001F1EB\U0001F1F7\U0001F1E9") == ["\U0001F1EB\U0001F1F7", "\U0001F1E9"]
    assert graphemes("a\u200fb") == ["a", "\u200f", "b"]
    assert not any(map(is_letter_cluster, [" ", "\u00a0", "\u200f", "\ufeff", "\u0301"]))


def _word_starts_with_a_mark(word):
    return any(unicodedata.category(w[0]).startswith("M") for w in word.split(" ") if w)


def test_pool_never_cuts_a_combining_mark_from_its_base():
    triples = [(lemma, form, "N") for lemma, form in DECOMPOSED * 3]
    alphabet = training_alphabet(triples)
    assert "e\u0301" in alphabet and "\u0301" not in alphabet
    pool = stem_corrupt_pool(triples, StemCorruptConfig(pool_size=600, seed=0))
    for lemma, form, _ in pool:
        assert not _word_starts_with_a_mark(lemma) and not _word_starts_with_a_mark(form)
        assert set(graphemes(lemma + form)) <= set(alphabet)
    assert len({lemma for lemma, _, _ in pool}) > 50


def test_bidi_controls_and_byte_order_marks_never_enter_a_stem():
    controls = "\u200f\u202b\u2066\ufeff"
    triples = [(f"{c}kitab", f"{c}kitabun", "N") for c in controls] + \
              [("qalam", "qalamun", "N"), ("bayt\ufeff", "baytun", "N")]
    assert not set(controls) & set("".join(training_alphabet(triples)))
    pool = stem_corrupt_pool(triples, StemCorruptConfig(pool_size=300, seed=1))
    for i, (lemma, form, _) in enumerate(pool):   # every pair has a stem: rows cycle the file
        gold_lemma, gold_form, _ = triples[i % len(triples)]
        for word, gold in ((lemma, gold_lemma), (form, gold_form)):
            # the gold word's controls, where it has them, and no new one
            assert [(i, c) for i, c in enumerate(word) if c in controls] == \
                   [(i, c) for i, c in enumerate(gold) if c in controls], repr(word)
    assert {lemma for lemma, _, _ in pool} > {lemma for lemma, _, _ in triples}


def test_multi_word_forms_keep_their_spaces_and_gain_none():
    gold = [("olla", "on ollut", "V"), ("syödä", "on syönyt", "V"), ("tehdä", "on tehnyt", "V"),
            ("new york", "new yorker", "N"), ("ice cream", "ice creams", "N"),
            ("mother in law", "mothers in law", "N")]
    pool = stem_corrupt_pool(gold, StemCorruptConfig(pool_size=600, seed=0))
    for lemma, form, _ in pool:
        for word in (lemma, form):
            assert word == word.strip() and "  " not in word, repr(word)
    by_tag = {}
    for lemma, form, tag in pool:
        by_tag.setdefault(tag, []).append((lemma, form))
    assert all(form.startswith("on ") and " " not in lemma for lemma, form in by_tag["V"])
    assert all(lemma.count(" ") == form.count(" ") for lemma, form in by_tag["N"])


def test_aligned_clusters_spell_the_pairs_exactly():
    pairs = [("a b", "axb"), ("x y", "xy"), ("e\u0301te\u0301", "e\u0301te\u0301s")]
    for (lemma, form), (a, b) in zip(pairs, CrpAligner(seed=0).align_clusters(pairs),
                                     strict=True):
        assert len(a) == len(b) and "".join(a) == lemma and "".join(b) == form


def test_real_multi_word_language_pool_is_clean(data_dir, require_data):
    path = require_data(data_dir / "sigmorphon2018" / "finnish-train-low")
    triples = read_triples(path)
    shapes = {(lemma.count(" "), form.count(" "), tags) for lemma, form, tags in triples}
    pool = stem_corrupt_pool(triples, StemCorruptConfig(pool_size=2000))
    for lemma, form, tags in pool:
        for word in (lemma, form):
            assert word == word.strip() and "  " not in word and not _word_starts_with_a_mark(word)
        assert (lemma.count(" "), form.count(" "), tags) in shapes   # spaces as a gold pair's
    assert sum(" " in form for _, form, _ in pool) > 100
