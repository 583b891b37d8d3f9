"""N-gram scores inside sampling (compgen/lm/rerank.py) on the shipped SCAN generator: the
lm_logprob column is the kenlm module's score of the chosen side, --rerank orders the
candidates before the N best are kept, --min-lm-logprob filters, and a missing or
corrupt LM is one error line before anything is decoded."""

import subprocess
import sys
from pathlib import Path

import kenlm
import pytest

from compgen.lm.rerank import LmRanking
from compgen.sampling.run import sample_export

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"
ACTIONS = ("I_JUMP", "I_WALK", "I_RUN", "I_LOOK", "I_TURN_LEFT", "I_TURN_RIGHT")
# A bigram model over SCAN's actions (KenLM loads order >= 2) that dislikes turns: the
# LM ranking differs from the generator's.
SCAN_ARPA = "\n".join(["\\data\\", f"ngram 1={len(ACTIONS) + 3}", "ngram 2=1", "",
                       "\\1-grams:", "-3.0\t<unk>\t0", "-99\t<s>\t-0.1", "-1.0\t</s>\t0",
                       *[f"{-2.0 if 'TURN' in a else -0.5}\t{a}\t0" for a in ACTIONS],
                       "", "\\2-grams:", "-0.2\t<s> I_WALK", "", "\\end\\", ""])


@pytest.fixture(scope="module")
def scan_lm(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm") / "scan.arpa"
    path.write_text(SCAN_ARPA, encoding="utf-8")
    return path


def sample(lm, rerank="model", min_lm=None, side="y", tmp=None):
    ranking = LmRanking.from_options(str(lm), side=side, rerank=rerank, min_logprob=min_lm)
    out = tmp / f"{rerank}-{side}-{min_lm}.tsv"
    run = sample_export(SHIPPED, n=12, backend="onnx", strategy="greedy", nsamples=30,
                        batch_size=32, seed=0, out=out, threads=1, log=lambda m: None,
                        lm=ranking)
    return run, out


def test_lm_column_rerank_and_filter(scan_lm, tmp_path):
    model = kenlm.Model(str(scan_lm))
    by_model, out = sample(scan_lm, "model", tmp=tmp_path)
    header = out.read_text(encoding="utf-8").splitlines()[0]
    assert header == "#x\ty\tlogprob\tlm_logprob"
    for s in by_model.samples:
        assert s.lm_logprob == pytest.approx(model.score(" ".join(s.y)), abs=1e-5)
    assert [s.logprob for s in by_model.samples] == sorted(
        (s.logprob for s in by_model.samples), reverse=True)

    by_lm, _ = sample(scan_lm, "lm", tmp=tmp_path)
    lm_scores = [s.lm_logprob for s in by_lm.samples]
    assert lm_scores == sorted(lm_scores, reverse=True)
    assert min(lm_scores) >= max(s.lm_logprob for s in by_model.samples
                                 if s.y not in [t.y for t in by_lm.samples])
    assert {tuple(s.y) for s in by_lm.samples} != {tuple(s.y) for s in by_model.samples}

    floor = sorted(s.lm_logprob for s in by_model.samples)[len(by_model.samples) // 2]
    filtered, _ = sample(scan_lm, "model", min_lm=floor, tmp=tmp_path)
    assert len(filtered.samples) == 12 and all(s.lm_logprob >= floor for s in filtered.samples)

    xy, _ = sample(scan_lm, "model", side="xy", tmp=tmp_path)
    # every x word and <sep> are unknown to this model: each costs <unk>'s -3.0
    s = xy.samples[0]
    assert s.lm_logprob == pytest.approx(model.score(" ".join([*s.x, "<sep>", *s.y])), abs=1e-5)


@pytest.mark.parametrize("kind,backend", [("missing", "onnx"), ("corrupt", "onnx"),
                                          ("missing", "cpp"), ("corrupt", "cpp")])
def test_bad_lm_is_one_error_line_before_decoding(kind, backend, tmp_path, scan_lm):
    path = tmp_path / "model.bin"
    if kind == "corrupt":
        path.write_bytes(b"mmap me\x00" * 64)
    proc = subprocess.run([sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--n", "5",
                           "--backend", backend, "--lm", f"{scan_lm},{path}", "--lm-weight",
                           "0.2", "--rerank", "sum", "-o", str(tmp_path / "out.tsv")],
                          capture_output=True, text=True, cwd=ROOT, check=False, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --lm ") and str(path) in lines[0]
    assert ("no such file" if kind == "missing" else "not a KenLM model") in lines[0]
    assert not (tmp_path / "out.tsv").exists() and "samples" not in proc.stdout
