"""The ``*-csl`` pipeline rows: CSL's samples become the predictor's augmentation file,
with the samples' quality measured against the SCAN grammar."""

import json
from pathlib import Path

from compgen.data.scan import load_scan_grammar
from compgen.data.scan_semantics import interpret
from compgen.io import read_samples_tsv
from compgen.pipelines.runs import CSL_SAMPLES, RUNS, PipelineOptions, Timer, make_csl


def test_csl_uniform_row_writes_samples_grammar_and_their_quality(small_scan: Path, tmp_path: Path):
    run = RUNS["jump-csl-uniform"]
    opts = PipelineOptions(root=tmp_path, data_dir=small_scan, log=lambda line: None)
    timer = Timer(tmp_path / "timing.json")
    path = make_csl(run, 0, tmp_path, opts, timer)
    samples = read_samples_tsv(path)
    assert len(samples) == CSL_SAMPLES
    assert "NT_1 twice ### NT_1 NT_1" in (tmp_path / "grammar.txt").read_text()
    quality = json.loads((tmp_path / "augment.quality.json").read_text())
    assert quality["rules"] >= 10 and "csl" in timer.seconds
    # the shares recorded are those of the written file
    reading = sum(interpret(x) == list(y) for x, y in samples) / len(samples)
    assert abs(quality["reading_correct_share"] - reading) < 1e-12
    grammar = load_scan_grammar(small_scan)
    by_grammar = sum(grammar.get(tuple(x)) == tuple(y) for x, y in samples) / len(samples)
    assert abs(quality["scan_grammar_correct_share"] - by_grammar) < 1e-12
    # a second call finds the file and does no work
    before = path.stat().st_mtime_ns
    assert make_csl(run, 0, tmp_path, opts, timer) == path and path.stat().st_mtime_ns == before
