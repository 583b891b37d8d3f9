"""KenLM inside the C++ runner: its lm_logp column equals the kenlm module's scores (and
the Python scorer's mixtures) to 1e-4 on hand-written ARPA models, checked by hand too;
a bad model stops the runner with one error line."""

import subprocess
from pathlib import Path

import kenlm
import pytest

from compgen.errors import UserError
from compgen.export.cpp_runner import build_runner, kenlm_query_dir, read_cpp_lm_scores, run_cpp
from compgen.lm.scorer import NgramScorer, side_text

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"

ACTIONS = ("I_JUMP", "I_WALK", "I_RUN", "I_LOOK", "I_TURN_LEFT", "I_TURN_RIGHT")


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
def runner():
    if not (kenlm_query_dir() / "lib" / "libkenlm.a").is_file():
        pytest.skip(f"KenLM's query library not built in {kenlm_query_dir()} "
                    "(bash scripts/install_kenlm.sh)")
    return build_runner(log=lambda m: None, kenlm=True)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("arpa")
    (folder / "base.arpa").write_text(arpa("I_WALK"), encoding="utf-8")
    (folder / "aug.arpa").write_text(arpa("I_JUMP"), encoding="utf-8")
    return folder / "base.arpa", folder / "aug.arpa"


def run(runner, tmp_path, *lm_args):
    out = tmp_path / "samples.tsv"
    run_cpp(runner, SHIPPED, out, n=24, batch_size=24, strategy="greedy", seed=0, max_len=45,
            threads=1, lm_args=list(lm_args))
    rows = [line.split("\t") for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    pairs = [(x.split(), y.split()) for x, y, *_ in rows]
    return pairs, read_cpp_lm_scores(out)


def test_cpp_scores_equal_the_kenlm_module(runner, models, tmp_path):
    pairs, scores = run(runner, tmp_path, "--lm", str(models[0]))
    module = kenlm.Model(str(models[0]))
    assert len(scores) == 24 and len({tuple(y) for _, y in pairs}) > 5
    for (_, y), score in zip(pairs, scores):
        assert score == pytest.approx(module.score(" ".join(y)), abs=1e-4)
        assert score == pytest.approx(by_hand(y), abs=1e-4)
    assert by_hand(["I_WALK"]) == pytest.approx(-0.2 - 1.0)
    assert by_hand(["I_TURN_LEFT", "jump"]) == pytest.approx(-0.1 - 2.0 - 3.0 - 1.0)


@pytest.mark.parametrize("mix,weight", [("token", 0.3), ("sentence", 0.3), ("geca", 0.25),
                                        ("token", 0.0)])
def test_cpp_mixtures_equal_the_python_scorer(runner, models, tmp_path, mix, weight):
    scorer = NgramScorer(*models, mix=mix, weight=weight)
    for side in ("y", "xy"):
        pairs, scores = run(runner, tmp_path, "--lm", f"{models[0]},{models[1]}", "--lm-weight",
                            str(weight), "--lm-mix", mix, "--lm-side", side)
        expected = scorer.score([side_text(x, y, side) for x, y in pairs])
        assert scores == pytest.approx(expected.tolist(), abs=1e-4)


def test_bad_model_is_one_error_line(runner, models, tmp_path):
    corrupt = tmp_path / "corrupt.bin"
    corrupt.write_bytes(b"\x00not a model\n" * 30)
    for bad in (tmp_path / "missing.bin", corrupt):
        with pytest.raises(UserError, match=f"--lm {bad}: not a KenLM model"):
            run(runner, tmp_path, "--lm", f"{models[0]},{bad}")
    proc = subprocess.run([str(runner), str(SHIPPED), "-o", str(tmp_path / "o.tsv"), "--lm",
                           str(corrupt)], capture_output=True, text=True, check=False)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: --lm ")
    assert not (tmp_path / "o.tsv").exists()
