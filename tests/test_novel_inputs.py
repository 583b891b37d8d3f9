"""Novelty-aware decoding (--novel-inputs): the training inputs in a token trie, <sep> masked
where a row's input so far is one of them. On the shipped SCAN export, with the real
backends: no decoded row closes a training input, the rows that never pass one are
decoded exactly as without the option (the random stream is keyed by sample and step),
and every backend keeps the same samples for the same seed."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compgen.data.vocab import SEP, Vocab
from compgen.decoding.input_trie import InputTrie
from compgen.decoding.options import SampleOptions
from compgen.runtimes.artifact import load_manifest
from compgen.sampling.collection import input_stop, known_input_trie, make_filter
from compgen.sampling.run import ExportDecoder, shipped_training_table

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"
BACKENDS = ("onnx", "torchscript", "torch", "cpp")
JOB = ("--strategy temperature --temperature 1.0 --resample none --n 24 --nsamples 24 "
       "--batch-size 32 --max-rounds 20 --seed 11 --threads 1 --precision fp32 "
       "--no-test-dropout --device cpu")


def test_trie_marks_complete_inputs_only():
    trie = InputTrie([[5, 6], [5, 6, 7], [8]])
    nodes = trie.start(4)
    assert not trie.closes_known(nodes).any()            # the empty input is not known
    nodes = trie.advance(nodes, np.array([5, 8, 9, 5]))
    assert trie.closes_known(nodes).tolist() == [False, True, False, False]
    nodes = trie.advance(nodes, np.array([6, 6, 6, 7]))  # 8 6 and 9 6 leave the trie
    assert trie.closes_known(nodes).tolist() == [True, False, False, False]
    nodes = trie.advance(nodes, np.array([7, 5, 5, 6]))
    assert trie.closes_known(nodes).tolist() == [True, False, False, False]
    assert (nodes[1:] == trie.off).all()


def decoded_rows(novel_inputs: bool, backend: str = "onnx"):
    manifest = load_manifest(SHIPPED)
    options = SampleOptions(manifest.config["sample"], strategy="temperature",
                            temperature=1.0, seed=4, threads=1, device="cpu",
                            novel_inputs=novel_inputs)
    filt = make_filter(manifest.config, shipped_training_table(SHIPPED), "none", None)
    vocab = Vocab.load(SHIPPED / "vocab.json")
    decoder = ExportDecoder(SHIPPED, manifest, backend, options, input_stop(filt, vocab),
                            known_input_trie(filt, vocab, novel_inputs))
    rows, _ = decoder(np.arange(96), "temperature", 1.0, 0)
    return [vocab.decode(row, strip=True) for row in rows], filt


def input_of(tokens):
    return tuple(tokens[:tokens.index(SEP)]) if SEP in tokens else None


def test_no_row_closes_a_training_input_and_the_others_are_unchanged():
    plain, filt = decoded_rows(False)
    masked, _ = decoded_rows(True)
    known = filt.train_inputs
    closed_known = [input_of(r) in known for r in plain]
    assert any(closed_known), "the test needs rows that close a training input without it"
    assert not any(input_of(r) in known for r in masked)

    # a row is decoded as without the option up to the first step where <sep> is masked
    # (its input so far is then a training input): the draws are keyed by sample and step
    for plain_row, masked_row in zip(plain, masked):
        first = next((k for k in range(1, len(masked_row) + 1)
                     if tuple(masked_row[:k]) in known), len(masked_row))
        assert plain_row[:first] == masked_row[:first]
    # rows that did close a known input now go on past it
    assert all(masked[i] != plain[i] for i, c in enumerate(closed_known) if c)


def sample(tmp_path: Path, backend: str, *extra: str) -> bytes:
    out = tmp_path / f"{backend}{''.join(extra)}.tsv"
    command = [sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--backend", backend,
               *JOB.split(), *extra, "-o", str(out)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stderr}"
    return out.read_bytes()


def pairs_and_scores(text: bytes):
    rows = [line.split("\t") for line in text.decode().splitlines() if not line.startswith("#")]
    return [tuple(r[:2]) for r in rows], np.array([float(r[2]) for r in rows])


def test_every_backend_keeps_the_same_samples(tmp_path):
    if shutil.which("cmake") is None or shutil.which("c++") is None:
        pytest.skip("the C++ runner needs cmake and a C++ compiler (c++) on PATH to build")
    want_pairs, want_scores = pairs_and_scores(sample(tmp_path, "torch", "--novel-inputs"))
    train = {tuple(line.split("\t")[0].split()) for line in
             (SHIPPED / "train.tsv").read_text(encoding="utf-8").splitlines() if line}
    assert len(want_pairs) == 24
    assert not any(tuple(x.split()) in train for x, _ in want_pairs)
    for backend in BACKENDS[:-1] + ("cpp",):
        if backend == "torch":
            continue
        pairs, scores = pairs_and_scores(sample(tmp_path, backend, "--novel-inputs"))
        assert pairs == want_pairs, backend
        assert np.abs(scores - want_scores).max() <= 2e-5, backend
    plain_pairs, _ = pairs_and_scores(sample(tmp_path, "onnx"))
    assert plain_pairs != want_pairs   # the option changes what is drawn


def test_beam_or_a_filter_without_novelty_is_refused(tmp_path):
    command = [sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--strategy", "beam",
               "--novel-inputs", "--n", "4", "-o", str(tmp_path / "s.tsv")]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        ("error: --novel-inputs: greedy, temperature or mixed sampling only (not "
         "--strategy beam)")]
    assert not (tmp_path / "s.tsv").exists()
    keeps_training = make_filter({"data": "scan/jump", "sample": {"novel": False}},
                                 shipped_training_table(SHIPPED), "none", None)
    with pytest.raises(Exception, match="filter keeps training inputs"):
        known_input_trie(keeps_training, Vocab.load(SHIPPED / "vocab.json"), True)
