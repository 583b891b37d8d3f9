"""Rows whose input the filter rejects stop at <sep>: the kept samples are the same, the
decoding shorter."""

from pathlib import Path

import numpy as np
import pytest

from compgen.data.vocab import PAD_ID, SEP, Vocab
from compgen.decoding.options import SampleOptions
from compgen.runtimes.artifact import load_manifest
from compgen.sampling.collection import input_stop, make_filter
from compgen.sampling.run import ExportDecoder, shipped_training_table

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"


@pytest.fixture(scope="module")
def export():
    manifest = load_manifest(SHIPPED)
    return manifest, Vocab.load(SHIPPED / "vocab.json"), shipped_training_table(SHIPPED)


def decoded(export, strategy, resample, stop: bool, rows=128):
    manifest, vocab, table = export
    options = SampleOptions(manifest.config["sample"], n=10, strategy=strategy,
                            temperature=1.0, resample=resample, seed=7, threads=1,
                            device="cpu")
    filt = make_filter(manifest.config, table, resample, None)
    decoder = ExportDecoder(SHIPPED, manifest, "onnx", options,
                            input_stop(filt, vocab) if stop else None)
    idx = np.arange(rows) * 97 % manifest.prototypes
    tokens, scores = decoder(idx, strategy, 1.0, 0)
    kept = make_filter(manifest.config, table, resample, None)   # a fresh seen-set
    accepted = [(kept.accept(vocab.decode(row)), score) for row, score in zip(tokens, scores)]
    return tokens, accepted, filt


@pytest.mark.parametrize("strategy, resample", [("temperature", "none"), ("greedy", "rare"),
                                                ("mixed", "none")])
def test_the_same_samples_are_kept_with_less_decoding(export, strategy, resample):
    full, want, _ = decoded(export, strategy, resample, stop=False)
    short, got, _ = decoded(export, strategy, resample, stop=True)
    kept, wanted = [a for a in got if a[0]], [a for a in want if a[0]]
    assert [pair for pair, _ in kept] == [pair for pair, _ in wanted] and wanted
    # a row's floats may round differently in a smaller batch (as with compaction):
    # the log-probabilities agree within the decoding contract's tolerance
    assert all(abs(a - b) <= 1e-4 for (_, a), (_, b) in zip(kept, wanted))
    written = [sum(t != PAD_ID for t in row) for row in full]
    stopped = [sum(t != PAD_ID for t in row) for row in short]
    assert sum(stopped) < sum(written)
    assert all(s <= w for s, w in zip(stopped, written))


def test_an_input_the_filter_rejects_is_never_kept(export):
    """rejects_input(x) promises that accept rejects x with any output: checked on every
    decoded row, and on each row's input with another row's output."""
    manifest, vocab, table = export
    tokens, _, filt = decoded(export, "temperature", "none", stop=False, rows=256)
    pairs = []
    for row in tokens:
        words = vocab.decode(row)
        if words.count(SEP) == 1:
            i = words.index(SEP)
            pairs.append((words[:i], words[i + 1:]))
    assert any(filt.rejects_input(x) for x, _ in pairs)
    assert not all(filt.rejects_input(x) for x, _ in pairs)
    outputs = [y for _, y in pairs]
    fresh = make_filter(manifest.config, table, "none", None)  # remembers only what it keeps
    for k, (x, _) in enumerate(pairs):
        if filt.rejects_input(x):
            for y in (outputs[k], outputs[(k + 1) % len(outputs)]):
                assert fresh.accept([*x, SEP, *y]) is None
