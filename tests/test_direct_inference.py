"""Direct inference (spec §7.2): prototype retrieval on hand-made cases, the forced input,
output-only rescoring, and the evaluation row of a tiny recomb-2 generator trained on
real SCAN jump data."""

import math

import polars as pl
import pytest
import torch
from typer.testing import CliRunner

from compgen.cli import app
from compgen.data import load_dataset
from compgen.data.vocab import PAD_ID, SEP, SEP_ID, Vocab
from compgen.errors import UserError
from compgen.evaluation.direct_inference import (
    LABEL,
    direct_inference,
    evaluate_direct,
    forced_greedy,
    output_nll,
    prototype_pairs,
    setdiff,
    unique_pairs,
)
from compgen.models.recombine import collate_prototypes, collate_targets, pad_2d
from compgen.models.seq2seq import Seq2Seq, Seq2SeqConfig
from compgen.training.checkpoint import apply_overrides, load_generator, load_preset
from compgen.training.generator import train_generator
from compgen.training.generator_data import GeneratorData
from compgen.training.predictor import save_predictor

torch.set_num_threads(1)


# ------------------------------------------------------------------ retrieval

def words(text):
    return text.split()


def test_setdiff_keeps_first_occurrence_order():
    assert setdiff(words("jump twice and jump left"), words("walk twice")) == ["jump", "and", "left"]
    assert setdiff(words("walk twice"), words("twice walk left")) == []


def test_first_prototypes_most_similar_first_and_seconds_cover_the_difference():
    query = words("jump around left twice")
    train = [words(t) for t in (
        "walk around left twice",               # 0: sim 0.75, lacks jump
        "jump around left twice and walk",      # 1: sim 0.67 but holds every token: no
        "run around left",                      # 2: sim 0.5, not > 0.5
        "jump",                                 # 3: the only second prototype for d = [jump]
        "look around left twice twice",         # 4: sim 0.6
        "run around left twice",                # 5: sim 0.75, ties with 0 -> after it
        "jump twice",                           # 6: sim(d, .) = 0.5, not > 0.5
    )]
    assert prototype_pairs([query], train) == [[(0, 3), (5, 3), (4, 3)]]
    assert prototype_pairs([query], train, k=2) == [[(0, 3), (5, 3)]]
    # second prototypes need sim(d, u_l) > 0.5 AND lengths less than 5 apart; that only
    # binds for |d| >= 6 (sim > 0.5 already means |u_l| < 2 |d|)
    query = words("a a a a a a a b c d e f g")
    train = [words("a a a a a a a"),        # the first prototype (sim 0.54): d = b c d e f g
             words("b c d e f g x x x x x"),  # sim(d, .) 0.55 but 11 - 6 = 5: no
             words("b c d e f g x x x x"),    # sim 0.6, 4 apart
             words("b c d e f g x")]          # sim 0.86
    assert prototype_pairs([query], train) == [[(0, 3), (0, 2)]]


def test_fallbacks_are_one_random_pair_fixed_by_the_seed():
    train = [words(t) for t in ("walk", "run left", "look twice", "turn right")]
    query = words("fly away quickly")  # nothing is similar; its tokens are all unseen
    pairs = prototype_pairs([query], train, seed=3)
    assert len(pairs[0]) == 1 and all(0 <= i < len(train) for i in pairs[0][0])
    assert prototype_pairs([query], train, seed=3) == pairs
    assert {prototype_pairs([query], train, seed=s)[0][0] for s in range(20)} != {pairs[0][0]}


# ------------------------------------------------------------------ a tiny trained generator

@pytest.fixture(scope="module")
def table(data_dir):
    return load_dataset("scan/jump", data_dir)


@pytest.fixture(scope="module")
def generator(tmp_path_factory, table):
    """A tiny recomb-2 generator, 39 updates on 100 real SCAN jump training data, each
    with the first prototype pair that direct-inference retrieval finds for it."""
    train = unique_pairs(table, "train")[:120]
    inputs = [x for x, _ in train]
    data = [x + [SEP] + y for x, y in train]
    items = [(data[i], [data[n], data[l]])
             for i, pairs in enumerate(prototype_pairs(inputs, inputs)) for n, l in pairs[:1]]
    vocab = Vocab.from_table(table.filter(pl.col("split") == "train"))
    config = apply_overrides(load_preset("recombine_scan_cpu"), {
        "model.hidden": 16, "model.embed": 8, "model.attdim": 8, "train.batch_size": 8,
        "train.epochs": 3, "train.log_every": 1000})
    path = tmp_path_factory.mktemp("direct") / "recomb2.pt"
    prepared = GeneratorData(vocab, items[:100], items[100:], "scan", "jump", table)
    result = train_generator(config, "scan/jump", path, prepared=prepared, progress=False,
                             log=lambda line: None)
    assert result.finished and result.steps == 39
    return path


def test_forced_decoding_starts_with_the_input_and_separator(generator, table):
    model, vocab, _ = load_generator(generator)
    train = unique_pairs(table, "train")
    data_ids = [vocab.encode(x + [SEP] + y) for x, y in train]
    sources = [u for u, _ in unique_pairs(table, "test")[:6]]
    pairs = [p[0] for p in prototype_pairs(sources, [x for x, _ in train])]
    protos = collate_prototypes([[data_ids[n], data_ids[l]] for n, l in pairs], "scan", 45)
    memory, state = model.encode(protos, model.prior_z(len(sources)), 45)
    prefixes = [vocab.encode(u) + [SEP_ID] for u in sources]
    torch.manual_seed(0)
    tokens, ended = forced_greedy(model, memory, state, pad_2d(prefixes), 45)
    for row, p in zip(tokens.tolist(), prefixes):
        assert row[:len(p)] == p               # the input part is exactly u <sep>
        assert row[len(p)] != PAD_ID           # then the model writes on its own
    assert ended.dtype == torch.bool and tokens.size(1) <= 45


def test_rescoring_counts_the_output_part_only(generator, table):
    """With dropout off, the NLL from position 0 is the teacher-forced loss of
    ``Recombine.loss``; from |u| + 1 on it drops exactly the input tokens and <sep>."""
    model, vocab, _ = load_generator(generator)
    model.outdrop_test = False
    train = unique_pairs(table, "train")[:5]
    data = [vocab.encode(x + [SEP] + y) for x, y in train]
    protos = collate_prototypes([[data[1], data[2]], [data[3], data[4]]], "scan", 45)
    targets = collate_targets([data[0], data[4]], "scan", 45)
    memory, state = model.encode(protos, model.prior_z(2), targets.size(1))
    whole = output_nll(model, memory, state, targets, torch.zeros(2, dtype=torch.long))
    _, loss_nll, _ = model.loss(targets, protos)
    assert float(whole.sum()) == pytest.approx(float(loss_nll), rel=1e-5)
    input_len = torch.tensor([len(train[0][0]), len(train[4][0])])
    output_only = output_nll(model, memory, state, targets, input_len + 1)
    assert torch.all(output_only < whole) and torch.all(output_only > 0)


def test_direct_inference_results_and_row(generator, table, data_dir, tmp_path):
    model, vocab, _ = load_generator(generator)
    train = unique_pairs(table, "train")
    tests = unique_pairs(table, "test")[:10]
    torch.manual_seed(0)
    results = direct_inference(model, vocab, train, tests, seed=0, batch_size=16, group=4)
    for result, (u, y) in zip(results, tests):
        assert result.source == u and result.reference == y
        assert 1 <= len(result.pairs) <= 25
        assert 1 <= len(result.candidates) <= len(result.pairs)
        scores = [c.score for c in result.candidates]
        assert scores == sorted(scores) and all(math.isfinite(s) and s > 0 for s in scores)

    rows = evaluate_direct(generator, data_dir=data_dir, limit=10, batch_size=64,
                           predictions=tmp_path / "pred.tsv")
    assert len(rows) == 1
    row = rows[0]
    assert {"model", "label", "data", "seed", "set", "subset", "n", "exact_match", "f1",
            "top3_match"} <= set(row)
    assert (row["label"], row["data"], row["set"], row["subset"], row["n"]) == \
        (LABEL, "scan/jump", "test", "all", 10)
    assert 0.0 <= row["exact_match"] <= row["top3_match"] <= 1.0 and 0.0 <= row["f1"] <= 1.0
    lines = (tmp_path / "pred.tsv").read_text().splitlines()
    assert len(lines) == 11 and lines[1].split("\t")[1] == " ".join(tests[0][0])


def test_evaluate_cli_direct_and_errors(generator, data_dir, tmp_path):
    runner = CliRunner()
    out = tmp_path / "results.csv"
    result = runner.invoke(app, ["evaluate", str(generator), "--direct", "--limit", "3",
                                 "-o", str(out), "--data-dir", str(data_dir)])
    assert result.exit_code == 0, result.output
    written = pl.read_csv(out)
    assert written["label"].to_list() == [LABEL] and written["n"].to_list() == [3]
    assert "top3_match" in written.columns
    for args, message in ((["--limit", "3"], "--limit"),   # --limit without --direct
                          ([], "--direct")):               # a generator needs --direct or --plots
        result = runner.invoke(app, ["evaluate", str(generator), *args])
        assert isinstance(result.exception, UserError) and message in str(result.exception)
    # --direct on a predictor checkpoint
    vocab = Vocab.build([["jump", "I_JUMP"]])
    predictor = tmp_path / "predictor.pt"
    save_predictor(predictor, Seq2Seq(Seq2SeqConfig(vocab_size=len(vocab), hidden=8, embed=4)),
                   vocab, {"data": "scan/jump", "task": "scan", "seed": 0})
    result = runner.invoke(app, ["evaluate", str(predictor), "--direct"])
    assert isinstance(result.exception, UserError) and "generator" in str(result.exception)
