"""KenLM's query library in C++ (cpp_runner/src/kenlm_scorer.cpp, run as compgen-lm-score):
its scores equal the kenlm module's and hand-computed values to 1e-4 on hand-written ARPA
models, its mixtures equal the Python scorer's; a bad model is one error line."""

import kenlm
import pytest

from compgen.errors import UserError
from compgen.export.cpp_runner import kenlm_query_dir, lm_score_binary, score_with_cpp
from compgen.lm.scorer import NgramScorer, side_text

ACTIONS = ("I_JUMP", "I_WALK", "I_RUN", "I_LOOK", "I_TURN_LEFT", "I_TURN_RIGHT")
PAIRS = [(["jump"], ["I_JUMP"]), (["walk", "twice"], ["I_WALK", "I_WALK"]),
         (["turn", "left"], ["I_TURN_LEFT"]), (["look", "right"], ["I_TURN_RIGHT", "I_LOOK"]),
         (["run", "and", "jump"], ["I_RUN", "I_JUMP", "jump"]), (["x"], [])]


def unigram(word: str) -> float:
    return -2.0 if "TURN" in word else -0.5


def arpa(bigram: str) -> str:
    """Bigram model over SCAN's actions: unigrams by ``unigram``, backoff 0 except
    bo(<s>) = -0.1, one bigram ``<s> bigram`` at -0.2, p(</s>) = -1.0, p(<unk>) = -3.0."""
    return "\n".join(["\\data\\", f"ngram 1={len(ACTIONS) + 3}", "ngram 2=1", "", "\\1-grams:",
                      "-3.0\t<unk>\t0", "-99\t<s>\t-0.1", "-1.0\t</s>\t0",
                      *[f"{unigram(a)}\t{a}\t0" for a in ACTIONS], "", "\\2-grams:",
                      f"-0.2\t<s> {bigram}", "", "\\end\\", ""])


def by_hand(words: list[str]) -> float:
    """log10 P(words </s> | <s>) under arpa("I_WALK")."""
    score, previous = 0.0, "<s>"
    for word in [*words, "</s>"]:
        p = -1.0 if word == "</s>" else unigram(word) if word in ACTIONS else -3.0
        score += -0.2 if (previous, word) == ("<s>", "I_WALK") else p + (
            -0.1 if previous == "<s>" else 0.0)
        previous = word
    return score


@pytest.fixture(scope="module")
def built():
    if not (kenlm_query_dir() / "lib" / "libkenlm.a").is_file():
        pytest.skip(f"KenLM's query library not built in {kenlm_query_dir()} "
                    "(bash scripts/install_kenlm.sh)")
    return lm_score_binary(log=lambda m: None)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("arpa")
    (folder / "base.arpa").write_text(arpa("I_WALK"), encoding="utf-8")
    (folder / "aug.arpa").write_text(arpa("I_JUMP"), encoding="utf-8")
    return folder / "base.arpa", folder / "aug.arpa"


def test_cpp_scores_equal_the_kenlm_module_and_the_hand(built, models):
    scores = score_with_cpp(PAIRS, ["--lm", str(models[0])])
    module = kenlm.Model(str(models[0]))
    assert len(scores) == len(PAIRS)
    for (_, y), score in zip(PAIRS, scores):
        assert score == pytest.approx(module.score(" ".join(y)), abs=1e-4)
        assert score == pytest.approx(by_hand(y), abs=1e-4)
    assert by_hand(["I_WALK", "I_WALK"]) == pytest.approx(-0.2 - 0.5 - 1.0)
    assert by_hand(["I_TURN_LEFT"]) == pytest.approx(-0.1 - 2.0 - 1.0)


@pytest.mark.parametrize("mix,weight", [("token", 0.3), ("sentence", 0.3), ("geca", 0.25),
                                        ("token", 0.0)])
def test_cpp_mixtures_equal_the_python_scorer(built, models, mix, weight):
    scorer = NgramScorer(*models, mix=mix, weight=weight)
    for side in ("y", "xy"):
        scores = score_with_cpp(PAIRS, ["--lm", f"{models[0]},{models[1]}", "--lm-weight",
                                        str(weight), "--lm-mix", mix, "--lm-side", side])
        expected = scorer.score([side_text(x, y, side) for x, y in PAIRS])
        assert scores == pytest.approx(expected.tolist(), abs=1e-4)


def test_bad_model_is_one_error_line(built, models, tmp_path):
    corrupt = tmp_path / "corrupt.bin"
    corrupt.write_bytes(b"\x00not a model\n" * 30)
    for bad in (tmp_path / "missing.bin", corrupt):
        with pytest.raises(UserError, match=f"--lm {bad}: not a KenLM model"):
            score_with_cpp(PAIRS, ["--lm", f"{models[0]},{bad}"])
