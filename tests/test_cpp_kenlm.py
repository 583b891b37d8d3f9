"""KenLM's query library in C++ (cpp_runner/src/kenlm_scorer.cpp), on its own
(compgen-lm-score) and inside the sampling runner (lm_ranking.hpp): its scores equal the
kenlm module's and hand-computed values to 1e-4 on hand-written ARPA models, its mixtures
equal the Python scorer's, weight 0 is the base model, the runner filters and reranks
as the ONNX Runtime path does (same samples TSV), and a bad model is one error line before
anything else is loaded."""

import subprocess
from pathlib import Path

import kenlm
import pytest

from compgen.decoding.contract import rank_key
from compgen.decoding.options import SampleOptions
from compgen.errors import UserError
from compgen.lm.rerank import LmRanking
from compgen.lm.scorer import NgramScorer, side_text
from compgen.runtimes.artifact import load_manifest
from compgen.runtimes.cpp import build_runner, job_text, score_with_cpp
from compgen.sampling.run import read_scored_samples, sample_export

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"

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
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("arpa")
    (folder / "base.arpa").write_text(arpa("I_WALK"), encoding="utf-8")
    (folder / "aug.arpa").write_text(arpa("I_JUMP"), encoding="utf-8")
    return folder / "base.arpa", folder / "aug.arpa"


def test_cpp_scores_equal_the_kenlm_module_and_the_hand(kenlm_runner, models):
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
def test_cpp_mixtures_equal_the_python_scorer(kenlm_runner, models, mix, weight):
    scorer = NgramScorer(*models, mix=mix, weight=weight)
    for side in ("y", "xy"):
        scores = score_with_cpp(PAIRS, ["--lm", f"{models[0]},{models[1]}", "--lm-weight",
                                        str(weight), "--lm-mix", mix, "--lm-side", side])
        expected = scorer.score([side_text(x, y, side) for x, y in PAIRS])
        assert scores == pytest.approx(expected.tolist(), abs=1e-4)


def test_bad_model_is_one_error_line(kenlm_runner, models, tmp_path):
    corrupt = tmp_path / "corrupt.bin"
    corrupt.write_bytes(b"\x00not a model\n" * 30)
    for bad, reason in ((tmp_path / "missing.bin", "no such file"), (corrupt, "not a KenLM model")):
        with pytest.raises(UserError, match=f"--lm {bad}: {reason}"):
            score_with_cpp(PAIRS, ["--lm", f"{models[0]},{bad}"])


# ------------------------------------------------------------------ inside the runner

def sample_with_lm(backend, spec, tmp_path, weight=None, **options):
    """(samples as written, the LmRanking used) from the shipped export with ``backend``."""
    ranking = LmRanking.from_options(spec, weight, **options)
    out = tmp_path / f"{backend}.tsv"
    sample_export(SHIPPED, n=12, backend=backend, strategy="temperature", temperature=0.7,
                  nsamples=40, batch_size=32, seed=3, out=out, threads=1,
                  log=lambda m: None, lm=ranking)
    return read_scored_samples(out.read_text(encoding="utf-8"), str(out)), ranking


def test_runner_scores_equal_the_kenlm_module_and_the_hand(kenlm_runner, models, tmp_path):
    samples, ranking = sample_with_lm("cpp", str(models[0]), tmp_path)
    module = kenlm.Model(str(models[0]))
    assert len(samples) == 12 and ranking.scorer.sentences >= 40  # counted by the runner
    for s in samples:
        assert s.lm_logprob == pytest.approx(module.score(" ".join(s.y)), abs=1e-4)
        assert s.lm_logprob == pytest.approx(by_hand(s.y), abs=1e-4)
    # interpolation weight 0 is the base model; another weight reads the augmented model
    base_only = [(s.x, s.y, s.lm_logprob) for s in samples]
    at_zero, _ = sample_with_lm("cpp", f"{models[0]},{models[1]}", tmp_path, weight=0.0)
    assert [(s.x, s.y, s.lm_logprob) for s in at_zero] == base_only
    mixed, _ = sample_with_lm("cpp", f"{models[0]},{models[1]}", tmp_path, weight=0.3)
    assert [s.lm_logprob for s in mixed] != [s.lm_logprob for s in samples]


@pytest.mark.parametrize("rerank,side,mix,floor", [("model", "y", None, None),
                                                   ("lm", "y", "token", -10.0),
                                                   ("sum", "xy", "sentence", -40.0)])
def test_runner_keeps_the_samples_onnx_keeps(kenlm_runner, models, tmp_path, rerank, side, mix,
                                             floor):
    spec = str(models[0]) if mix is None else f"{models[0]},{models[1]}"
    kept, rankings = {}, {}
    for backend in ("onnx", "cpp"):
        kept[backend], rankings[backend] = sample_with_lm(
            backend, spec, tmp_path, weight=None if mix is None else 0.3, side=side,
            mix=mix or "token", rerank=rerank, min_logprob=floor)
    onnx, cpp = kept["onnx"], kept["cpp"]
    assert len(cpp) == 12
    assert [(s.x, s.y) for s in cpp] == [(s.x, s.y) for s in onnx]
    for a, b in zip(cpp, onnx):
        assert abs(a.logprob - b.logprob) <= 1e-4 and abs(a.lm_logprob - b.lm_logprob) <= 1e-4
    # both scored the same candidates: those the floor rejected did not count towards 40
    assert rankings["cpp"].scorer.sentences == rankings["onnx"].scorer.sentences
    if floor is not None:
        assert rankings["cpp"].scorer.sentences > 40
        assert all(s.lm_logprob >= floor for s in cpp)
    ranks = [rank_key(rankings["cpp"].rank_score(s)) for s in cpp]
    assert ranks == sorted(ranks)
    if rerank != "model":
        assert [s.logprob for s in cpp] != sorted((s.logprob for s in cpp), reverse=True)


def test_runner_bad_model_is_one_error_line_before_anything_is_loaded(kenlm_runner, models,
                                                                       tmp_path):
    """The export folder does not exist either: the LM is what the runner loads first."""
    corrupt = tmp_path / "corrupt.bin"
    corrupt.write_bytes(b"\x00not a model\n" * 30)
    contract = load_manifest(SHIPPED).contract()

    def run(binary, lm_lines):
        options = SampleOptions(strategy="greedy", temperature=1.0, seed=0, n=4, batch_size=4,
                                max_rounds=1, threads=1)
        job = job_text(tmp_path / "no-export", contract, options, out=tmp_path / "out.tsv",
                       filter_spec=lm_lines)
        proc = subprocess.run([str(binary)], input=job, capture_output=True, text=True,
                              check=False)
        assert proc.returncode == 2 and proc.stdout == ""
        return proc.stderr.strip().splitlines()

    for bad, reason in ((tmp_path / "missing.bin", "no such file"), (corrupt, "not a KenLM model")):
        lines = run(kenlm_runner, {"lm_base": models[0], "lm_aug": bad, "lm_weight": 0.5})
        assert len(lines) == 1 and lines[0].startswith(f"error: --lm {bad}: {reason}")
    plain = build_runner(log=lambda m: None)  # the build without KenLM refuses an LM job
    assert run(plain, {"lm_base": models[0]}) == [
        "error: --lm: this runner was built without KenLM (-DCOMPGEN_KENLM=ON)"]
    assert not (tmp_path / "out.tsv").exists()
