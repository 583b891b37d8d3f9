"""The inflection model: training on a toy morphology, beam search, scores, checkpoint,
the lemma-split test set, and the select / train / evaluate commands' errors."""

import math
import subprocess
import sys

import numpy as np
import pytest
import torch

from compgen.data.lemma_split import lemma_split_candidates, sample_rows
from compgen.models.inflection import InflectionConfig
from compgen.training.inflection import (
    InflectionTrainConfig,
    exact_match,
    learning_rate,
    load_inflection,
    min_validation_interval,
    predict,
    train_inflection,
    uncertainty,
)

TINY = InflectionConfig(embed_dim=32, ffn_dim=64, heads=2, encoder_layers=1, decoder_layers=1,
                        dropout=0.0, attention_dropout=0.0)
STEMS = ["kal", "mor", "tup", "sen", "vid", "pal", "rok", "nem", "lis", "dab", "fur", "gos"]


def toy(stems):
    return [row for s in stems for row in ((s, s + "ar", "V;PST"), (s, "e" + s, "V;FUT"))]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory, one_torch_thread):
    path = tmp_path_factory.mktemp("infl") / "m.pt"
    cfg = InflectionTrainConfig(updates=600, warmup=100, lr=3e-3, batch_size=8,
                                validate_every=100, model=TINY)
    state = train_inflection(toy(STEMS), toy(STEMS[:4]), path, cfg)
    return path, state


def test_learning_rate_schedule():
    cfg = InflectionTrainConfig()
    assert learning_rate(0, cfg) == pytest.approx(1e-7)
    assert learning_rate(2000, cfg) == pytest.approx((1e-7 + 1e-3) / 2, rel=1e-3)
    assert learning_rate(4000, cfg) == pytest.approx(1e-3)
    assert learning_rate(16000, cfg) == pytest.approx(5e-4)


def test_training_learns_a_toy_inflection(tiny_model):
    path, state = tiny_model
    assert state["updates"] == 600 and 0 < state["best_update"] <= 600
    model = load_inflection(path)
    rows = toy(STEMS)
    forms, scores = predict(model, rows, beam=5)
    assert exact_match(forms, [f for _, f, _ in rows]) > 0.9
    assert all(-5 < s <= 0 for s in scores)


def test_uncertainty_modes(tiny_model):
    model = load_inflection(tiny_model[0])
    good = ("kal", "kalar", "V;PST")
    bad = ("kal", "zzzzz", "V;PST")
    ref = uncertainty(model, [good, bad], "reference")
    assert ref[0] < ref[1]
    hyp = uncertainty(model, [good, bad], "hypothesis")
    assert hyp[0] == pytest.approx(hyp[1])          # the hypothesis ignores the given form
    _, scores = predict(model, [good])
    assert hyp[0] == pytest.approx(-scores[0] / math.log(2))


def test_checkpoint_round_trip_is_exact(tiny_model):
    a, b = load_inflection(tiny_model[0]), load_inflection(tiny_model[0])
    src = torch.tensor([[5, 6, 7, 8]])
    tgt = torch.tensor([[1, 5, 6]])
    assert torch.equal(a.net(src, tgt), b.net(src, tgt))


def test_lemma_split_excludes_train_and_dev_lemmas_and_keeps_duplicates():
    files = {"train-low": [("a", "a1", "T")], "train-medium": [("a", "a1", "T"), ("b", "b1", "T")],
             "train-high": [("a", "a1", "T"), ("b", "b1", "T"), ("c", "c1", "T")],
             "dev": [("c", "c2", "U")], "test": [("d", "d1", "T")]}
    assert lemma_split_candidates(files) == [("b", "b1", "T"), ("b", "b1", "T"), ("d", "d1", "T")]


def test_sample_rows_matches_pandas():
    pd = pytest.importorskip("pandas")
    rows = list(range(5000))
    frame = pd.DataFrame({"r": rows})
    assert sample_rows(rows, 1000, 0) == frame.sample(n=1000, replace=False, random_state=0)["r"].tolist()


def test_sample_rows_is_the_legacy_permutation_prefix():
    rows = [f"r{i}" for i in range(3000)]
    picks = np.random.RandomState(0).permutation(3000)[:1000]
    assert sample_rows(rows, 1000) == [rows[i] for i in picks]
    assert sample_rows(rows[:10], 1000) == rows[:10]


def test_lemma_split_sizes_on_the_shared_data(data_dir, require_data):
    from compgen.augment.stem_corrupt import read_triples
    from compgen.data.lemma_split import SOURCE_SPLITS, lemma_split_test

    folder = data_dir / "sigmorphon2018"
    require_data(folder / "georgian-train-high")
    files = {s: read_triples(folder / f"georgian-{s}") for s in SOURCE_SPLITS}
    assert len(lemma_split_candidates(files)) == 8833        # the spec's count
    test = lemma_split_test("georgian", data_dir)
    excluded = {r[0] for r in files["train-low"] + files["dev"]}
    assert len(test) == 1000 and not {r[0] for r in test} & excluded


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "compgen", *args], capture_output=True, text=True,
                          check=False)


def _one_error(run, message):
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1, run.stderr
    assert lines[0].startswith("error:") and message in lines[0]


def test_select_command(tmp_path, tiny_model):
    pool = tmp_path / "pool.tsv"
    pool.write_text("".join(f"{a}\t{b}\t{t}\n" for a, b, t in toy(STEMS)), encoding="utf-8")
    out = tmp_path / "subset.tsv"
    cache = tmp_path / "nll.txt"
    run = _cli("select", str(pool), "--strategy", "umt+loss", "--size", "6", "--scorer",
               str(tiny_model[0]), "--scores", str(cache), "--uncertainty", "reference", "-o", str(out))
    assert run.returncode == 0, run.stderr
    chosen = out.read_text(encoding="utf-8").splitlines()
    assert len(chosen) == len(set(chosen)) == 6
    assert {line.split("\t")[2] for line in chosen} == {"V;PST", "V;FUT"}
    # one score per pool row, after the line that records what they were computed with
    header, *scores = cache.read_text().splitlines()
    assert header.startswith("# compgen uncertainty scores") and len(scores) == 24
    bad = tmp_path / "bad.tsv"
    bad.write_text("kal\tkalar\n", encoding="utf-8")
    empty = tmp_path / "empty.tsv"
    empty.write_text("", encoding="utf-8")
    x = str(tmp_path / "x.tsv")
    _one_error(_cli("select", str(bad), "--size", "1", "-o", x), "bad.tsv:1")
    _one_error(_cli("select", str(empty), "--size", "1", "-o", x), "empty.tsv")
    _one_error(_cli("select", str(pool), "--size", "25", "-o", x), "larger than the pool")
    _one_error(_cli("select", str(pool), "--size", "2", "--strategy", "lots", "-o", x), "strategy")
    _one_error(_cli("select", str(pool), "--size", "2", "--strategy", "highloss", "-o", x), "--scorer")
    _one_error(_cli("train", "inflection", "klingon", "-o", x), "unknown SIGMORPHON language")
    assert not (tmp_path / "x.tsv").exists()


def test_incremental_decoder_matches_the_full_decoder(one_torch_thread):
    from compgen.models.inflection import IncrementalDecoder, InflectionTransformer

    torch.manual_seed(0)
    net = InflectionTransformer(InflectionConfig(embed_dim=64, ffn_dim=96, heads=4), 30, 40).eval()
    src = torch.randint(4, 30, (6, 9))
    src[2, 6:] = 0   # padding in the source
    tgt = torch.randint(4, 40, (6, 7))
    tgt[:, 0] = 1
    with torch.no_grad():
        full = net(src, tgt)
        decoder = IncrementalDecoder(net, *net.encode(src))
        steps = torch.stack([decoder.step(tgt[:, t]) for t in range(7)], 1)
    assert torch.allclose(full, steps, atol=1e-5)
    assert (full - steps).abs().max() < (full.abs().max() * 1e-5)


def test_epoch_validation_is_spaced_by_its_cost(tmp_path, one_torch_thread):
    # 24 rows in batches of 8: an epoch is 3 updates; the 72-row dev pass costs about 30
    # updates of training, so epoch-end passes come only every 30+ updates, plus the last
    rows = toy(STEMS)
    dev = rows * 3
    cfg = InflectionTrainConfig(updates=100, warmup=10, batch_size=8, validate_every=0, model=TINY)
    state = train_inflection(rows, dev, tmp_path / "m.pt", cfg)
    interval = min_validation_interval(len(dev), cfg.batch_size)
    assert 3 < interval < 100
    expected, last = [], 0
    for epoch_end in range(3, 100, 3):
        if epoch_end - last >= interval:
            expected.append(epoch_end)
            last = epoch_end
    assert [step for step, _ in state["curve"]] == expected + [100]
