"""Scoring as the reference does it: micro F1 (and its edge cases), morphology units,
exact match with the 45-token truncation, NOVEL subsets, mean ± std tables, PNG plots."""

import math
import subprocess

import polars as pl
import pytest

from compgen.data.vocab import EOS_ID, PAD_ID
from compgen.errors import UserError
from compgen.evaluation.evaluate import aggregate, evaluation_sets, write_results
from compgen.evaluation.plots import plot_attention, plot_learning_curve
from compgen.models.metrics import (
    eval_units,
    exact_match,
    micro_f1,
    reference_view,
    score_predictions,
    token_f1,
)
from compgen.models.seq2seq import cut_prediction

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ F1

def test_f1_micro_counts_over_the_whole_set():
    # ex1: tp 2 (a, b), fp 1 (c), fn 0; ex2: tp 1 (d), fp 0, fn 2 (e, f)
    preds = [["a", "b", "c"], ["d"]]
    refs = [["a", "b"], ["d", "e", "f"]]
    p, r = 3 / 4, 3 / 5
    assert micro_f1(preds, refs) == pytest.approx(2 * p * r / (p + r))
    # a per-example average would differ: (0.8 + 0.5) / 2
    assert micro_f1(preds, refs) != pytest.approx(0.65)


def test_f1_repeated_predictions_each_count():
    assert micro_f1([["a", "a"]], [["a"]]) == 1.0           # tp 2, fp 0, fn 0
    assert micro_f1([["a", "a", "b"]], [["a", "c"]]) == pytest.approx(2 / 3)  # tp 2 fp 1 fn 1


def test_f1_edge_cases_of_the_reference_formula():
    assert micro_f1([["x"]], [["y"]]) == 0.0                 # P = 0
    assert micro_f1([[], []], [["a"], ["b"]]) == 0.0         # P = 0/0 but R = 0 -> 0
    assert micro_f1([["a"]], [[]]) == 0.0                    # R = 0/0 but P = 0 -> 0
    assert math.isnan(micro_f1([[]], [[]]))                  # P = R = 0/0 -> NaN, as Julia
    assert math.isnan(micro_f1([], []))
    assert micro_f1([["a", "b"]], [["b", "a"]]) == 1.0       # order does not matter for F1


def test_morphology_units_and_lemma_as_one_unit():
    assert eval_units(list("abc") + ["V", "PST", "3", "SG"], True) == ["abc", "V", "PST", "3", "SG"]
    assert eval_units(list("no ir") + ["V", "NFIN"], True) == ["no ir", "V", "NFIN"]
    assert eval_units(list("ab") + ["3", "SG"], True) == ["ab", "3", "SG"]  # numerals start tags
    # no token entirely upper/numeric ("V.PTCP" has a dot): the raw list is scored
    assert eval_units(["a", "V.PTCP"], True) == ["a", "V.PTCP"]
    # ...but with one such token, the split is at the first token whose FIRST char is upper
    assert eval_units(["a", "V.PTCP", "PST"], True) == ["a", "V.PTCP", "PST"]
    assert eval_units(["a", "b", "V.PTCP", "PST"], True) == ["ab", "V.PTCP", "PST"]
    assert eval_units(["I_JUMP", "I_WALK"], False) == ["I_JUMP", "I_WALK"]
    # a wrong lemma character costs one unit, not one character
    pred, ref = list("abd") + ["V", "PST"], list("abc") + ["V", "PST"]
    scored = score_predictions([pred], [ref], morphology=True)
    assert scored["f1"] == pytest.approx(2 / 3) and scored["exact_match"] == 0.0
    assert score_predictions([pred], [ref], morphology=False)["f1"] == pytest.approx(0.8)


def test_token_f1_counts_a_repeated_token_once_per_reference_occurrence():
    preds, refs = [["SELECT", "SELECT", "SELECT"]], [["SELECT", "name", "FROM"]]
    assert token_f1(preds, refs) == pytest.approx(1 / 3)     # tp 1, fp 2, fn 2
    assert micro_f1(preds, refs) == pytest.approx(0.75)      # membership: tp 3, fp 0, fn 2
    assert score_predictions(preds, refs, morphology=False)["f1"] == token_f1(preds, refs)
    assert token_f1([["a", "b"]], [["b", "a"]]) == 1.0 and math.isnan(token_f1([[]], [[]]))


# ------------------------------------------------------------------ exact match + truncation

def test_exact_match_and_reference_truncation():
    assert exact_match([["a"], ["b"]], [["a"], ["c"]]) == 0.5
    assert math.isnan(exact_match([], []))
    long = [f"t{i}" for i in range(50)]
    assert reference_view(long, 45) == long[:44]
    assert reference_view(long[:45], 45) == long[:45]
    # a 45-step prediction without </s> loses its last token ...
    assert cut_prediction([7] * 45) == [7] * 44
    assert cut_prediction([7, 8, EOS_ID, 9]) == [7, 8]
    assert cut_prediction([7, PAD_ID, 9]) == [7]
    # ... so a > 45-token reference matches on its first 44 tokens, a 45-token one never
    assert score_predictions([long[:44]], [long], False)["exact_match"] == 1.0
    assert score_predictions([long[:44]], [long[:45]], False)["exact_match"] == 0.0
    assert score_predictions([long[:44]], [long[:44]], False)["correct"] == [True]


# ------------------------------------------------------------------ NOVEL subsets

def _morph_table():
    def row(lemma, form, tags, split):
        return {"x": list(lemma) + tags, "y": list(form), "split": split, "tags": tags}

    rows = [row("ab", "abo", ["V", "PRS"], "train"), row("cd", "cdi", ["V", "PST", "1"], "train"),
            row("ef", "efa", ["V", "FUT"], "test_hard"),          # novel
            row("gh", "ghi", ["V", "PST", "1"], "test_hard"),     # seen bundle
            row("gh", "ghi", ["V", "PST", "1"], "test_hard"),     # duplicate: dropped
            row("ij", "ijo", ["V", "PST"], "val_hard"),           # novel (subset of a bundle)
            row("kl", "klo", ["V", "PRS"], "test_easy")]          # seen
    return pl.DataFrame(rows)


def test_novel_subset_is_exact_tag_bundle_absent_from_training():
    sets = evaluation_sets(_morph_table())
    assert set(sets) == {"FUT", "PST", "OTHER"}
    assert sets["FUT"]["novel"].to_list() == [True, False]
    assert sets["PST"]["novel"].to_list() == [True]
    assert sets["OTHER"]["novel"].to_list() == [False]
    # the predictor reads analysis pairs: form -> lemma chars + tags
    assert sets["FUT"]["source"][0].to_list() == list("efa")
    assert sets["FUT"]["target"][0].to_list() == ["e", "f", "V", "FUT"]


def test_scan_evaluation_set_is_the_deduplicated_test_split(data_dir):
    from compgen.data import load_dataset

    sets = evaluation_sets(load_dataset("scan/jump", data_dir))
    assert list(sets) == ["test"] and sets["test"].height == 7706
    with pytest.raises(UserError, match="test"):
        evaluation_sets(pl.DataFrame({"x": [["a"]], "y": [["b"]], "split": ["train"]}))


# ------------------------------------------------------------------ tables

def _rows():
    base = {"data": "scan/jump", "set": "test", "subset": "all", "n": 10}
    return [{**base, "model": "s0", "label": "geca", "seed": 0, "exact_match": 0.5, "f1": 0.9},
            {**base, "model": "s1", "label": "geca", "seed": 1, "exact_match": 1.0, "f1": 0.7},
            {**base, "model": "b0", "label": "baseline", "seed": 0, "exact_match": 0.0, "f1": 0.8}]


def test_mean_and_population_std_over_seeds(tmp_path):
    summary = aggregate(_rows())
    geca = summary.filter(pl.col("label") == "geca").row(0, named=True)
    assert geca["models"] == 2
    assert geca["exact_match_mean"] == pytest.approx(0.75)
    assert geca["exact_match_std"] == pytest.approx(0.25)      # ddof 0, not 0.354
    assert geca["f1_mean"] == pytest.approx(0.8) and geca["f1_std"] == pytest.approx(0.1)
    base = summary.filter(pl.col("label") == "baseline").row(0, named=True)
    assert base["models"] == 1 and base["exact_match_std"] == 0.0

    paths = write_results(_rows(), tmp_path / "results.csv")
    assert pl.read_csv(paths["csv"]).height == 3
    assert pl.read_csv(paths["summary"]).height == 2
    md = paths["markdown"].read_text()
    assert "0.750 ± 0.250" in md and "| geca |" in md
    assert not list(tmp_path.glob(".*.tmp"))


# ------------------------------------------------------------------ plots

def test_plots_write_png_files(tmp_path):
    curve = tmp_path / "curve.csv"
    pl.DataFrame({"epoch": [1, 2, 3], "train_loss": [1.0, 0.5, 0.3],
                  "dev_exact_match": [0.1, 0.4, 0.6]}).write_csv(curve)
    for path in (plot_learning_curve(curve, tmp_path / "curve.png"),
                 plot_attention([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5]], ["I_JUMP", "I_WALK", "</s>"],
                                ["jump", "walk"], tmp_path / "att.png", title="jump and walk")):
        data = path.read_bytes()
        assert data[:8] == PNG_MAGIC and len(data) > 1000
    with pytest.raises(ValueError, match="labels"):
        plot_attention([[1.0]], ["a", "b"], ["c"], tmp_path / "bad.png")
    with pytest.raises(UserError):
        plot_learning_curve(tmp_path / "missing.csv", tmp_path / "x.png")


def test_generator_attention_figure(tmp_path, data_dir):
    """The paper's Fig. 3 for a (tiny, untrained) recomb-2 SCAN generator: the recorded
    step weights come with the model's own numbers (greedy decoding is unchanged), every
    prototype's attention row sums to 1 with nothing on padding, and
    ``compgen evaluate GENERATOR --plots`` writes the PNG."""
    import torch
    from typer.testing import CliRunner

    from compgen.cli import app
    from compgen.data import load_dataset
    from compgen.data.vocab import SEP, Vocab
    from compgen.evaluation.plots import plot_generator_attention
    from compgen.models.recombine import collate_prototypes, is_real
    from compgen.runtimes.eager import decode_batch, greedy_with_weights
    from compgen.training.checkpoint import build_recombine, load_preset, save_checkpoint

    table = load_dataset("scan/jump", data_dir)
    train = table.filter(pl.col("split") == "train").head(6)
    vocab = Vocab.from_table(table.filter(pl.col("split") == "train"))
    config = {**load_preset("recombine_scan_cpu"), "data": "scan/jump"}
    config["model"].update(hidden=16, embed=8, attdim=8, outdrop_test=False)  # deterministic
    torch.manual_seed(0)
    model = build_recombine(config, len(vocab)).eval()
    data = [vocab.encode(x + [SEP] + y) for x, y in zip(train["x"].to_list(), train["y"].to_list())]
    protos = collate_prototypes([data[0:2], data[2:4], data[4:6]], "scan", 45)
    decoded, weights = greedy_with_weights(model, protos, 45)
    plain = decode_batch(model, protos, "greedy", max_len=45)
    steps = decoded.tokens.size(1)
    assert torch.equal(decoded.tokens, plain.tokens[:, :steps])
    assert torch.allclose(decoded.scores, plain.scores)
    assert weights.attention.shape == (3, steps, 2, protos.size(2)) == weights.copy.shape
    assert torch.allclose(weights.attention.sum(-1), torch.ones(3, steps, 2), atol=1e-5)
    padding = ~is_real(protos)[:, None].expand_as(weights.attention)
    assert float(weights.attention[padding].abs().max()) < 1e-6
    copy = weights.copy.sum((2, 3))  # p(copy) per step; the rest is the write probability
    assert torch.all((copy > 0) & (copy < 1 + 1e-6))

    ckpt = tmp_path / "recomb2.pt"
    save_checkpoint(ckpt, model, config, vocab, "recombine")
    result = CliRunner().invoke(app, ["evaluate", str(ckpt), "--plots", str(tmp_path / "plots"),
                                      "--data-dir", str(data_dir)])
    assert result.exit_code == 0, result.output
    png = tmp_path / "plots" / "recomb2.attention0.png"
    assert png.read_bytes()[:8] == PNG_MAGIC and not (tmp_path / "results.csv").exists()
    with pytest.raises(ValueError, match="labels"):
        plot_generator_attention([[[1.0]], [[1.0, 0.0]]], ["a"], [["b"], ["c"]], [0.5],
                                 tmp_path / "bad.png")


def test_bad_checkpoints_are_user_errors(tmp_path):
    from compgen.evaluation.evaluate import evaluate_predictor

    not_ckpt = tmp_path / "model.pt"
    not_ckpt.write_text("hello")
    with pytest.raises(UserError, match="no such checkpoint"):
        evaluate_predictor(tmp_path / "missing.pt")
    proc = subprocess.run([".venv/bin/compgen", "evaluate", str(not_ckpt), "-o", str(tmp_path / "r.csv")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and "not a compgen checkpoint" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert not (tmp_path / "r.csv").exists()


# ------------------------------------------------------------------ the real few-shot split

def test_fewshot_novel_sizes_and_morphology_rows(tmp_path, data_dir):
    """NOVEL sizes of spanish hints-4.0 fall in the ranges measured on the reference build
    (spec appendix A: FUT 68-85, PST 85-91, OTHER 0); an (untrained) copy model yields
    every row of the paper's table and FUT+PST is the mean of FUT and PST."""
    import torch

    from compgen.data import load_dataset
    from compgen.data.vocab import Vocab
    from compgen.evaluation.evaluate import evaluate_predictor
    from compgen.models.seq2seq import Seq2Seq, Seq2SeqConfig
    from compgen.training.predictor import conditional_pairs, save_predictor

    table = load_dataset("sigmorphon/spanish/hints-4.0", data_dir)
    sets = evaluation_sets(table)
    assert 68 <= sets["FUT"]["novel"].sum() <= 85
    assert 85 <= sets["PST"]["novel"].sum() <= 91
    assert sets["OTHER"]["novel"].sum() == 0

    torch.manual_seed(0)
    vocab = Vocab.build([t for x, y in conditional_pairs(table) for t in (x, y)])
    model = Seq2Seq(Seq2SeqConfig(vocab_size=len(vocab), hidden=16, embed=8, copy=True))
    ckpt = tmp_path / "sig.pt"
    save_predictor(ckpt, model, vocab, {"data": "sigmorphon/spanish/hints-4.0",
                                        "task": "morphology", "seed": 0, "label": "x"})
    rows = evaluate_predictor(ckpt, data_dir=data_dir, predictions=tmp_path / "pred.tsv")
    got = {(r["set"], r["subset"]): r for r in rows}
    assert set(got) == {(s, sub) for s in ("FUT", "PST", "OTHER", "FUT+PST") for sub in ("all", "novel")}
    assert got["OTHER", "novel"]["n"] == 0 and math.isnan(got["OTHER", "novel"]["exact_match"])
    for sub in ("all", "novel"):
        hard = got["FUT+PST", sub]
        assert hard["f1"] == pytest.approx((got["FUT", sub]["f1"] + got["PST", sub]["f1"]) / 2)
        assert 0.0 <= hard["f1"] <= 1.0
    assert len((tmp_path / "pred.tsv").read_text().splitlines()) == 1 + 300
    with pytest.raises(UserError, match="cannot evaluate"):
        evaluate_predictor(ckpt, data="scan/jump", data_dir=data_dir)
