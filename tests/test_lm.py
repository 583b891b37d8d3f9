"""KenLM language models: real lmplz/build_binary runs, perplexity against a hand-written
ARPA model, interpolation modes, the paired t-test, the experiment pipeline, and errors."""

import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from compgen.cli.common import flag_of
from compgen.errors import SettingError, UserError
from compgen.lm import perplexity as ppl
from compgen.lm.experiment import run_experiment
from compgen.lm.kenlm_tools import find_kenlm_binaries, train_lm

ROOT = Path(__file__).resolve().parents[1]
COMPGEN = str(ROOT / ".venv" / "bin" / "compgen")

# A bigram model written by hand. log10 values; the third column is the backoff weight.
HAND_ARPA = """\\data\\
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
# By hand, log10 P(sentence </s> | <s>):
#   "a b": p(a|<s>) -0.2 + p(b|a) -0.4 + p(</s>|b) -0.1                          = -0.7
#   "b a": bo(<s>) -0.5 + p(b) -0.9; bo(b) 0 + p(a) -0.7; bo(a) -0.3 + p(</s>) -1.0 = -3.4
#   "c"  : bo(<s>) -0.5 + p(<unk>) -2.0; bo(<unk>) 0 + p(</s>) -1.0             = -3.5
HAND_SENTENCES = ["a b", "b a", "c"]
HAND_LOG10 = [-0.7, -3.4, -3.5]
HAND_TOKENS = 3 + 3 + 2   # words + </s> per sentence


def run_cli(*args, env=None):
    return subprocess.run([COMPGEN, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, check=False)


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def small_corpus(tmp_path_factory, data_dir):
    path = tmp_path_factory.mktemp("lm") / "kin300.txt"
    lines = (data_dir / "lm" / "kin" / "train.txt").read_text(encoding="utf-8").splitlines()[:300]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def small_models(small_corpus, tmp_path_factory):
    """A 3-gram ARPA model on 300 kin lines and a 5-gram binary model on 150 of them."""
    folder = tmp_path_factory.mktemp("lm_models")
    half = folder / "kin150.txt"
    half.write_text("\n".join(small_corpus.read_text(encoding="utf-8").splitlines()[:150]) + "\n")
    arpa = train_lm(small_corpus, folder / "a.arpa", order=3, discount_fallback=True)
    binary = train_lm(half, folder / "b.bin", order=5, discount_fallback=True)
    return arpa, binary


def test_lmplz_estimates_real_models(small_corpus, small_models, data_dir):
    arpa, binary = small_models
    header = arpa.read_text(encoding="utf-8").splitlines()[:5]
    assert header[0] == "\\data\\" and any(line.startswith("ngram 3=") for line in header)
    assert binary.read_bytes()[:6] != b"\\data\\"   # build_binary's format, not ARPA
    model_a = ppl.load_model(arpa)
    model_b = ppl.load_model(binary)
    assert (model_a.order, model_b.order) == (3, 5)
    first_word = small_corpus.read_text(encoding="utf-8").split()[0]
    assert first_word in model_a and "no-such-word-xyz" not in model_a
    # Perplexity on the training text is far below that on unseen test text.
    train = ppl.score_corpus(model_a, ppl.read_sentences(small_corpus))
    test = ppl.score_corpus(model_a, ppl.read_sentences(data_dir / "lm" / "kin" / "test.txt"))
    assert (ppl.perplexity(ppl.base_nll(train), train.n_tokens) * 3
            < ppl.perplexity(ppl.base_nll(test), test.n_tokens))
    # Per-token scores sum to KenLM's sentence scores.
    sums = np.add.reduceat(test.token_log10, test.starts)
    np.testing.assert_allclose(sums, test.sentence_log10, rtol=1e-5, atol=1e-4)


def test_tiny_corpus_needs_discount_fallback(tmp_path):
    corpus = tmp_path / "tiny.txt"
    corpus.write_text("a b c\na b d\n", encoding="utf-8")
    with pytest.raises(SettingError, match="rerun with discount_fallback") as refused:
        train_lm(corpus, tmp_path / "tiny.arpa", order=3)
    assert refused.value.text(flag_of).endswith("rerun with --discount_fallback")
    assert not (tmp_path / "tiny.arpa").exists()      # nothing half-written
    train_lm(corpus, tmp_path / "tiny.arpa", order=3, discount_fallback=True)
    assert ppl.load_model(tmp_path / "tiny.arpa").order == 3


def test_perplexity_of_hand_written_arpa(tmp_path):
    model_path = tmp_path / "hand.arpa"
    model_path.write_text(HAND_ARPA, encoding="utf-8")
    corpus = tmp_path / "hand.txt"
    corpus.write_text("\n".join(HAND_SENTENCES) + "\n", encoding="utf-8")
    scores = ppl.score_corpus(ppl.load_model(model_path), ppl.read_sentences(corpus))
    np.testing.assert_allclose(scores.sentence_log10, HAND_LOG10, atol=1e-5)
    assert scores.n_tokens == HAND_TOKENS
    expected = 10 ** (-sum(HAND_LOG10) / HAND_TOKENS)
    result = ppl.evaluate(model_path, corpus, corpus)
    assert len(result.rows) == 1
    assert result.rows[0]["test_ppl"] == pytest.approx(expected, rel=1e-5)
    assert result.n_tokens == {"val": HAND_TOKENS, "test": HAND_TOKENS}


def test_weight_zero_is_the_base_model_exactly(small_models, data_dir):
    base, aug = small_models
    for mode in ppl.MIXES:
        result = ppl.evaluate(base, "lm/kin", "lm/kin", aug, [0.0, 0.3], mode, data_dir)
        zero, other = result.rows
        alone = ppl.evaluate(base, "lm/kin", "lm/kin", None, None, mode, data_dir).rows[0]
        assert zero["test_ppl"] == alone["test_ppl"] and zero["val_ppl"] == alone["val_ppl"]
        assert (zero["t"], zero["p"], zero["test_delta"]) == (0.0, 1.0, 0.0)
        assert other["test_ppl"] != zero["test_ppl"]
        assert 0.0 <= other["p"] <= 1.0


def test_mixtures_of_a_model_with_itself_equal_the_model(small_models, data_dir):
    base, _ = small_models
    scores = ppl.score_splits(base, {"test": data_dir / "lm" / "kin" / "test.txt"}, "base")["test"]
    reference = ppl.base_nll(scores)
    for weight in (0.1, 0.5, 0.9):
        np.testing.assert_allclose(ppl.mix_token(scores, scores, weight), reference, rtol=1e-5)
        np.testing.assert_allclose(ppl.mix_sentence(scores, scores, weight), reference, rtol=1e-12)
        np.testing.assert_allclose(ppl.mix_geca(scores, scores, weight), reference, rtol=1e-12)


def test_mixture_formulas_on_hand_scores():
    # Two sentences of 2 and 1 words; per-token log10 probabilities chosen by hand.
    starts = np.array([0, 3])
    b_tok, a_tok = np.array([-1.0, -2.0, -0.5, -3.0, -1.0]), np.array([-2.0, -1.0, -0.5, -1.0, -2.0])
    b = ppl.CorpusScores(b_tok, np.array([-3.5, -4.0]), starts)
    a = ppl.CorpusScores(a_tok, np.array([-3.5, -3.0]), starts)
    lam = 0.25
    token = -np.log((1 - lam) * 10 ** b_tok + lam * 10 ** a_tok) @ np.array([[1, 0]] * 3 + [[0, 1]] * 2)
    np.testing.assert_allclose(ppl.mix_token(b, a, lam), token, rtol=1e-12)
    sentence = -np.log((1 - lam) * 10 ** b.sentence_log10 + lam * 10 ** a.sentence_log10)
    np.testing.assert_allclose(ppl.mix_sentence(b, a, lam), sentence, rtol=1e-12)
    # The reference formula is a power mean with exponent 1/ln 10 of the two probabilities.
    r, alpha = 0.5, 1 / math.log(10)
    pb, pa = 10 ** b.sentence_log10, 10 ** a.sentence_log10
    power_mean = (pb ** alpha / (1 + r) + r * pa ** alpha / (1 + r)) ** (1 / alpha)
    np.testing.assert_allclose(ppl.mix_geca(b, a, r), -np.log(power_mean), rtol=1e-12)
    # ...which never exceeds the proper mixture with the same aug weight r/(1+r).
    assert np.all(ppl.mix_geca(b, a, r) >= ppl.mix_sentence(b, a, r / (1 + r)) - 1e-12)
    with pytest.raises(SettingError, match="^weights: ") as refused:
        ppl.mix_token(b, a, 1.5)
    assert refused.value.text(flag_of).startswith("--weights: ")


def test_student_t_p_values_match_closed_forms():
    for t in (0.3, 1.0, 2.5, 7.0):
        assert ppl.student_t_two_sided_p(t, 1) == pytest.approx(1 - 2 / math.pi * math.atan(t), rel=1e-10)
        assert ppl.student_t_two_sided_p(-t, 2) == pytest.approx(1 - t / math.sqrt(t * t + 2), rel=1e-10)
    assert ppl.student_t_two_sided_p(1.959963985, 1e7) == pytest.approx(0.05, rel=1e-5)
    # Paired t-test: differences 1, 2, 3, 4 -> t = 2.5 / (sd / 2); df = 3 closed form.
    t, p = ppl.paired_t_test(np.array([2.0, 4.0, 6.0, 8.0]), np.array([1.0, 2.0, 3.0, 4.0]))
    assert t == pytest.approx(2.5 / (np.std([1, 2, 3, 4], ddof=1) / 2))
    u = t / math.sqrt(3)
    cdf = 0.5 + (u / (1 + u * u) + math.atan(u)) / math.pi
    assert p == pytest.approx(2 * (1 - cdf), rel=1e-9)
    assert ppl.paired_t_test(np.ones(5), np.ones(5)) == (0.0, 1.0)


def test_experiment_pipeline_on_na(tmp_path, data_dir):
    exp = run_experiment("na", tmp_path / "na", seed=0, data_dir=data_dir, log=lambda _: None)
    train = (data_dir / "lm" / "na" / "train.txt").read_text(encoding="utf-8").splitlines()
    augmented = (tmp_path / "na" / "augmented.txt").read_text(encoding="utf-8").splitlines()
    n_syn = exp.stats["synthetic_sentences"]
    assert n_syn > 100 and len(augmented) == len(train) + n_syn
    assert [" ".join(s.split()) for s in train] == augmented[:len(train)]
    assert not set(augmented[len(train):]) & set(augmented[:len(train)])   # novel sentences
    for name in ("results.md", "results.csv", "base.bin", "aug.bin", "stats.json"):
        assert (tmp_path / "na" / name).is_file()
    # The base row is the lmplz model of the train split alone, scored independently.
    base_alone = ppl.evaluate(tmp_path / "na" / "base.bin", "lm/na", "lm/na", data_dir=data_dir)
    assert exp.summary[0]["test_ppl"] == base_alone.rows[0]["test_ppl"]
    assert {row["mix"] for row in exp.rows} == set(ppl.MIXES)
    for mode in ppl.MIXES:
        rows = [row for row in exp.rows if row["mix"] == mode]
        assert sum(row["chosen"] for row in rows) == 1
        chosen = next(row for row in rows if row["chosen"])
        assert chosen["val_ppl"] == min(row["val_ppl"] for row in rows)
    csv = (tmp_path / "na" / "results.csv").read_text().splitlines()
    assert csv[0].startswith("mix,weight") and len(csv) == 1 + len(exp.rows)
    # Same seed, same augmented corpus.
    again = run_experiment("na", tmp_path / "na2", seed=0, data_dir=data_dir, log=lambda _: None)
    assert (tmp_path / "na2" / "augmented.txt").read_bytes() == (tmp_path / "na" / "augmented.txt").read_bytes()
    assert [r["test_ppl"] for r in again.rows] == [r["test_ppl"] for r in exp.rows]


def test_cli_train_and_eval(small_corpus, small_models, tmp_path):
    model = tmp_path / "m.bin"
    proc = run_cli("lm", "train", str(small_corpus), "--order", "3", "--discount_fallback", "-o", str(model))
    assert proc.returncode == 0, proc.stderr
    assert ppl.load_model(model).order == 3
    _, aug = small_models
    csv, md = tmp_path / "r.csv", tmp_path / "r.md"
    proc = run_cli("lm", "eval", "--base", str(model), "--aug", str(aug), "--val", "lm/kin",
                   "--test", "lm/kin", "--weights", "0,0.2", "--csv", str(csv), "--markdown", str(md))
    assert proc.returncode == 0, proc.stderr
    assert "chosen on val" in proc.stdout
    assert len(csv.read_text().splitlines()) == 3 and md.read_text().startswith("| mix |")


def test_bad_input_gives_one_error_line(tmp_path, small_models):
    base, _ = small_models
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(UserError, match="empty corpus"):
        train_lm(empty, tmp_path / "x.arpa")
    assert_one_line_error(run_cli("lm", "train", str(empty), "-o", str(tmp_path / "x.arpa")),
                          "empty corpus")
    assert not (tmp_path / "x.arpa").exists()
    assert_one_line_error(run_cli("lm", "train", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "x.arpa")),
                          "missing.txt")
    assert_one_line_error(run_cli("lm", "eval", "--base", str(tmp_path / "nope.bin"), "--val", "lm/kin",
                                  "--test", "lm/kin"), "--base", "nope.bin")
    assert_one_line_error(run_cli("lm", "eval", "--base", str(base), "--val", str(tmp_path / "v.txt"),
                                  "--test", "lm/kin"), "v.txt")
    assert_one_line_error(run_cli("lm", "eval", "--base", str(base), "--val", "lm/kin", "--test", "lm/kin",
                                  "--mix", "bogus"), "--mix")
    not_a_model = tmp_path / "bad.arpa"
    not_a_model.write_text("hello\n")
    assert_one_line_error(run_cli("lm", "eval", "--base", str(not_a_model), "--val", "lm/kin",
                                  "--test", "lm/kin"), "not a KenLM model")


def test_missing_lmplz_names_the_install_command(tmp_path, small_corpus, monkeypatch):
    kenlm_dirs = {str(find_kenlm_binaries()[0].parent)}
    path = os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep)
                           if p not in kenlm_dirs and not (Path(p) / "lmplz").exists())
    env = {**os.environ, "PATH": path, "COMPGEN_LMPLZ": str(tmp_path / "nowhere" / "lmplz")}
    proc = run_cli("lm", "train", str(small_corpus), "-o", str(tmp_path / "m.arpa"), env=env)
    assert_one_line_error(proc, "COMPGEN_LMPLZ", "bash scripts/install_kenlm.sh")
    # Nothing on PATH and an empty cache: the same hint.
    monkeypatch.setenv("PATH", path)
    monkeypatch.delenv("COMPGEN_LMPLZ", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(UserError, match="bash scripts/install_kenlm.sh"):
        train_lm(small_corpus, tmp_path / "m.arpa")
    assert not (tmp_path / "m.arpa").exists()
