"""KenLM models are trusted only once checked: a model whose stored probabilities are NaN is
one error line on load (never "perplexity nan" with exit 0, nor a traceback under
``--rerank lm``); ``--order`` is limited to what the build loads, before lmplz runs; lmplz
and the scorer split a corpus into the same words (non-breaking spaces, Unicode line
breaks), so a model scored on its own training text has no unknown words."""

import math
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from cli_subprocess import compgen, one_error_line

from compgen.errors import UserError
from compgen.lm import perplexity as ppl
from compgen.lm.kenlm_tools import find_kenlm_binaries, max_supported_order, train_lm
from compgen.lm.scores import load_model

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_dir):
    path = tmp_path_factory.mktemp("lm_trust") / "kin200.txt"
    lines = (data_dir / "lm" / "kin" / "train.txt").read_text(encoding="utf-8").splitlines()[:200]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def nan_model(corpus):
    """A binary model whose <unk> probability is stored as NaN (one float of the file)."""
    folder = corpus.parent
    arpa = train_lm(corpus, folder / "m.arpa", order=3, discount_fallback=True)
    _, build_binary = find_kenlm_binaries()
    good = folder / "m.bin"
    subprocess.run([str(build_binary), str(arpa), str(good)], capture_output=True, check=True)
    unk = next(float(line.split("\t")[0]) for line in arpa.read_text().splitlines()
               if line.split("\t")[1:2] == ["<unk>"])
    data = good.read_bytes()
    packed = struct.pack("<f", unk)
    assert data.count(packed) == 1
    bad = folder / "nan.bin"
    bad.write_bytes(data.replace(packed, struct.pack("<f", math.nan)))
    return good, bad


def test_a_model_with_nan_probabilities_is_refused_on_load(nan_model, corpus):
    good, bad = nan_model
    assert math.isfinite(load_model(good).score("compgen-probe-unknown-word"))
    with pytest.raises(UserError, match="non-finite log-probability"):
        load_model(bad, "base")
    one_error_line(compgen("lm", "eval", "--base", bad, "--val", corpus, "--test", corpus),
                   "--base", "nan.bin", "corrupt")
    one_error_line(compgen("lm", "eval", "--base", good, "--aug", bad, "--val", corpus,
                           "--test", corpus), "--aug", "nan.bin")


def test_rerank_lm_with_a_nan_model_is_one_error_line(nan_model, tmp_path):
    _, bad = nan_model
    proc = compgen("sample", SHIPPED, "--n", "3", "--lm", bad, "--rerank", "lm", "-o",
                   tmp_path / "s.tsv")
    one_error_line(proc, "nan.bin", "non-finite")
    assert not any(tmp_path.iterdir())


def test_order_beyond_the_build_is_refused_before_lmplz(corpus, tmp_path):
    limit = max_supported_order()
    assert 2 <= limit <= 64
    with pytest.raises(UserError, match=f"order <= {limit}"):
        train_lm(tmp_path / "does-not-exist.txt", tmp_path / "m.arpa", order=limit + 1)
    one_error_line(compgen("lm", "train", corpus, "--order", limit + 1, "-o", tmp_path / "m.arpa",
                           "--discount_fallback"), "--order", str(limit))
    one_error_line(compgen("lm", "train", "scan/jump", "--side", "y", "--order", limit + 1,
                           "-o", tmp_path / "m.arpa", "--discount_fallback"), "--order")
    assert not any(tmp_path.iterdir())
    top = train_lm(corpus, tmp_path / "top.bin", order=limit, discount_fallback=True)
    assert load_model(top).order == limit


def test_lmplz_and_the_scorer_read_the_same_words(corpus, tmp_path):
    lines = corpus.read_text(encoding="utf-8").splitlines()[:120]
    # non-breaking, thin, ideographic spaces between words, and a line separator in a line
    odd = [line.replace(" ", "\u00a0", 2).replace(" ", "\u2009", 1).replace(" ", "\u3000", 1)
           for line in lines[:60]] + [lines[60] + "\u2028" + lines[61]] + lines[62:]
    text = tmp_path / "odd.txt"
    text.write_text("\n".join(odd) + "\n", encoding="utf-8")
    model = train_lm(text, tmp_path / "odd.arpa", order=3, discount_fallback=True)
    result = ppl.evaluate(model, text, text)
    assert result.oov["test"].unknown_to_base == 0
    words = sum(len(line.split()) + 1 for line in odd for line in line.splitlines())
    assert result.n_tokens["test"] == words
    assert f"ngram 1={len({w for line in odd for w in line.split()}) + 3}" in model.read_text()


@pytest.fixture
def cached_kenlm(tmp_path):
    """A private cache holding a copy of KenLM's binaries where scripts/install_kenlm.sh
    puts them; PATH without lmplz, no $COMPGEN_LMPLZ: the cached ones are the ones used."""
    from compgen.lm.kenlm_tools import kenlm_version

    lmplz, build_binary = find_kenlm_binaries()
    xdg = tmp_path / "xdg"
    folder = xdg / "compgen" / "kenlm" / kenlm_version() / "bin"
    folder.mkdir(parents=True)
    for tool in (lmplz, build_binary):
        (folder / tool.name).write_bytes(tool.read_bytes())
        (folder / tool.name).chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "COMPGEN_LMPLZ"}
    env.update(PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(xdg), PATH=os.path.dirname(sys.executable))
    return folder, env


def lm_train(corpus, out, env):
    return subprocess.run([sys.executable, "-m", "compgen", "lm", "train", str(corpus), "-o",
                           str(out), "--order", "3", "--discount-fallback"], capture_output=True,
                          text=True, env=env, cwd=ROOT, check=False)


def test_cached_kenlm_binaries_run_only_with_a_matching_record(cached_kenlm, corpus, tmp_path):
    from compgen.system import cache

    folder, env = cached_kenlm
    out = tmp_path / "m.arpa"
    one_error_line(lm_train(corpus, out, env), "do not match their digest record")  # none yet
    cache.record(folder)   # as scripts/install_kenlm.sh does once it built them
    done = lm_train(corpus, out, env)
    assert done.returncode == 0, done.stderr
    assert "\\data\\" in out.read_text(encoding="utf-8")
    marker = tmp_path / "planted-ran"
    (folder / "lmplz").write_text(f"#!/bin/sh\ntouch {marker}\n")   # swapped after the record
    out.unlink()
    one_error_line(lm_train(corpus, out, env), "do not match their digest record")
    assert not marker.exists() and not out.exists()


def test_a_named_corpus_edited_in_the_data_folder_is_refused(data_dir, tmp_path):
    """lm/kin's files fetched into the data folder are checked against the sums compgen
    ships: an edited copy is refused by every reader, not trained or scored on."""
    from compgen.data import load_dataset
    from compgen.data.sources import fetch

    fetch("lm", tmp_path / "data", mirror=data_dir)
    folder = tmp_path / "data" / "lm" / "kin"
    assert load_dataset("lm/kin", tmp_path / "data").height > 0
    with open(folder / "train.txt", "a", encoding="utf-8") as out:
        out.write("a planted sentence\n")
    with pytest.raises(UserError, match="train.txt: does not match the sha256 compgen ships"):
        load_dataset("lm/kin", tmp_path / "data")
    proc = compgen("lm", "train", "lm/kin", "--data-dir", tmp_path / "data", "-o",
                   tmp_path / "m.arpa", cwd=ROOT)
    one_error_line(proc, "does not match the sha256 compgen ships for lm/kin/train.txt")
    assert not (tmp_path / "m.arpa").exists()
