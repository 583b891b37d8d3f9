"""The one n-gram scorer (compgen/lm/scorer.py) on hand-written ARPA models: base scores
by hand, interpolation weight 0 is the base model, weight chosen on validation text,
LM corpora from one side of example pairs, and errors for missing or corrupt models."""

import math

import numpy as np
import pytest

from compgen.cli.common import flag_of
from compgen.data.files import Fields
from compgen.errors import SettingError, UserError
from compgen.lm import perplexity as ppl
from compgen.lm.scorer import NgramScorer, parse_lm_spec, side_text

# Bigram models written by hand (log10; third column: backoff weight).
BASE_ARPA = """\\data\\
ngram 1=5
ngram 2=3

\\1-grams:
-2.0\t<unk>\t0
-99\t<s>\t-0.5
-1.0\t</s>\t0
-0.7\ta\t-0.3
-0.9\tb\t0

\\2-grams:
-0.2\t<s> a
-0.4\ta b
-0.1\tb </s>

\\end\\
"""
# By hand, log10 P(sentence </s> | <s>) under BASE_ARPA:
#   "a b": -0.2 - 0.4 - 0.1                      = -0.7
#   "b a": (-0.5 - 0.9) + (0 - 0.7) + (-0.3 - 1.0) = -3.4
BASE_LOG10 = {"a b": -0.7, "b a": -3.4}
# The augmented model knows the same words and prefers "b a".
AUG_ARPA = """\\data\\
ngram 1=5
ngram 2=3

\\1-grams:
-2.0\t<unk>\t0
-99\t<s>\t-0.2
-1.0\t</s>\t0
-0.5\ta\t0
-0.6\tb\t0

\\2-grams:
-0.1\t<s> b
-0.2\tb a
-0.3\ta </s>

\\end\\
"""
# "b a": -0.1 - 0.2 - 0.3 = -0.6;  "a b": (-0.2 - 0.5) + (0 - 0.6) + (0 - 1.0) = -2.3
AUG_LOG10 = {"a b": -2.3, "b a": -0.6}


@pytest.fixture
def models(tmp_path):
    base, aug = tmp_path / "base.arpa", tmp_path / "aug.arpa"
    base.write_text(BASE_ARPA, encoding="utf-8")
    aug.write_text(AUG_ARPA, encoding="utf-8")
    return base, aug


def test_base_model_scores_by_hand(models):
    scorer = NgramScorer(models[0])
    np.testing.assert_allclose(scorer.score(list(BASE_LOG10)), list(BASE_LOG10.values()),
                               atol=1e-5)
    assert scorer.sentences == 2 and scorer.order == 2


@pytest.mark.parametrize("mix", ppl.MIXES)
def test_weight_zero_is_the_base_model(models, mix):
    sentences = ["a b", "b a", "a a b", "c"]
    alone = NgramScorer(models[0]).score(sentences)
    mixed = NgramScorer(*models, mix=mix, weight=0.0).score(sentences)
    np.testing.assert_array_equal(mixed, alone)
    other = NgramScorer(*models, mix=mix, weight=0.5).score(sentences)
    assert not np.allclose(other, alone)


def test_mixtures_by_hand(models):
    sentences = list(BASE_LOG10)
    base = np.array(list(BASE_LOG10.values()))
    aug = np.array([AUG_LOG10[s] for s in sentences])
    # sentence mix: log10((1 - w) 10^b + w 10^a)
    expected = np.log10(0.7 * 10 ** base + 0.3 * 10 ** aug)
    got = NgramScorer(*models, mix="sentence", weight=0.3).score(sentences)
    np.testing.assert_allclose(got, expected, atol=1e-5)
    # token mix at weight 1 is the augmented model
    np.testing.assert_allclose(NgramScorer(*models, weight=1.0).score(sentences), aug, atol=1e-5)
    # geca mix (ratio r): natural-log logaddexp of log10 scores, read back as log10
    r = 0.25
    lp = np.logaddexp(base + math.log(1 / (1 + r)), aug + math.log(r / (1 + r)))
    got = NgramScorer(*models, mix="geca", weight=r).score(sentences)
    np.testing.assert_allclose(got, lp, atol=1e-5)


def test_weight_chosen_on_validation(models):
    scorer = NgramScorer(*models, mix="token")
    table = scorer.choose_weight(["b a"] * 5, [0.0, 0.1, 0.5])
    assert scorer.weight == 0.5 and table[0.5] < table[0.1] < table[0.0]
    table = scorer.choose_weight(["a b"] * 5, [0.0, 0.1, 0.5])
    assert scorer.weight == 0.0


def test_lm_val_says_what_it_read_and_the_perplexities_it_compared(models, tmp_path):
    from compgen.lm.rerank import LmRanking

    spec = f"{models[0]},{models[1]}"
    corpus = tmp_path / "val.txt"
    corpus.write_text("b a\n" * 5, encoding="utf-8")
    ranking = LmRanking.from_options(spec, val=str(corpus))
    table = NgramScorer(*models, mix="token").choose_weight(["b a"] * 5)
    line = ranking.weight_choice
    assert line.startswith(f"--lm-val {corpus}: one sentence per line, 5 sentences; perplexity "
                           "by token weight: ")
    assert line.endswith(f" -> weight {ranking.scorer.weight:g}") and ranking.scorer.weight > 0
    assert all(f"{w:g} {p:.4g}" in line for w, p in table.items())
    pairs = tmp_path / "val.tsv"     # a data file: every row's side is read
    pairs.write_text("x\tb a\n" * 3, encoding="utf-8")
    line = LmRanking.from_options(spec, val=str(pairs)).weight_choice
    assert line.startswith(f"--lm-val {pairs}: every row's y side, 3 sentences;")
    assert LmRanking.from_options(spec, weight=0.5).weight_choice is None
    records = tmp_path / "val.jsonl"   # fields of other names: read with the fields given
    records.write_text('{"q": "x", "a": "b a"}\n' * 4, encoding="utf-8")
    with pytest.raises(UserError, match="no input"):
        LmRanking.from_options(spec, val=str(records))
    line = LmRanking.from_options(spec, val=str(records), fields=Fields("q", "a")).weight_choice
    assert line.startswith(f"--lm-val {records}: every row's y side, 4 sentences;")


def test_eval_goes_through_the_scorer(models, tmp_path):
    corpus = tmp_path / "val.txt"
    corpus.write_text("a b\nb a\n", encoding="utf-8")
    result = ppl.evaluate(models[0], corpus, corpus, models[1], [0.0, 0.3], "sentence")
    nll = -np.log(0.7 * 10 ** np.array([-0.7, -3.4]) + 0.3 * 10 ** np.array([-2.3, -0.6]))
    assert result.rows[1]["test_ppl"] == pytest.approx(math.exp(nll.sum() / 6), rel=1e-5)


def test_missing_and_corrupt_models_are_user_errors(models, tmp_path):
    with pytest.raises(SettingError, match=r"^lm .*nope\.bin: no such file") as refused:
        NgramScorer.from_spec(str(tmp_path / "nope.bin"))
    assert refused.value.text(flag_of).startswith("--lm ")
    corrupt = tmp_path / "corrupt.bin"
    corrupt.write_bytes(b"\x00garbage, not a language model\n" * 20)
    with pytest.raises(UserError, match=r"corrupt\.bin: not a KenLM model"):
        NgramScorer.from_spec(f"{models[0]},{corrupt}")
    with pytest.raises(UserError, match="BASE or BASE,AUG"):
        parse_lm_spec("a,b,c")
    with pytest.raises(UserError, match="needs an augmented model"):
        NgramScorer(models[0], weight=0.5)
    with pytest.raises(UserError, match=r"in \[0, 1\]"):
        NgramScorer(*models, weight=1.5)


def test_side_text():
    assert side_text(["jump", "twice"], ["I_JUMP", "I_JUMP"], "y") == "I_JUMP I_JUMP"
    assert side_text(["jump"], ["I_JUMP"], "xy") == "jump <sep> I_JUMP"
    assert side_text(["a", " ", "b"], [], "x") == "a \u2581 b"
    with pytest.raises(SettingError, match="^lm_side z") as refused:
        side_text([], [], "z")
    assert refused.value.text(flag_of).startswith("--lm-side z")


def test_train_on_one_side_of_a_samples_tsv(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    from compgen.lm.kenlm_tools import find_kenlm_binaries
    from compgen.lm.vocabulary import model_vocabulary

    try:
        find_kenlm_binaries()
    except UserError as exc:
        pytest.skip(f"lmplz not built: {exc}")
    data = tmp_path / "pairs.tsv"
    data.write_text("jump twice\tI_JUMP I_JUMP\nwalk\tI_WALK\nlook left\tI_TURN_LEFT I_LOOK\n",
                    encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    for side, words in (("y", {"I_JUMP", "I_WALK", "I_TURN_LEFT", "I_LOOK"}),
                        ("xy", {"jump", "twice", "walk", "look", "left", "<sep>", "I_JUMP",
                                "I_WALK", "I_TURN_LEFT", "I_LOOK"})):
        out = tmp_path / f"{side}.arpa"
        proc = subprocess.run([sys.executable, "-m", "compgen", "lm", "train", str(data),
                               "--side", side, "-o", str(out), "--order", "3",
                               "--discount-fallback"], capture_output=True, text=True,
                              cwd=root, check=False)
        assert proc.returncode == 0, proc.stderr
        assert model_vocabulary(out) == words | {"</s>"}
    # each model with its digest record, nothing else
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pairs.tsv", "xy.arpa", "xy.arpa.sha256",
                                                          "y.arpa", "y.arpa.sha256"]
