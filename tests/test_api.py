"""Every function of the Python API (compgen.api) called at toy size on the shipped
numbers set (tests/data/numbers), with real torch, ONNX Runtime, the C++ runner and lmplz:
DataFrames in, DataFrames (or summaries) out."""

import math
import shutil
from pathlib import Path

import polars as pl
import pytest
import torch

import compgen
from compgen.errors import UserError

NUMBERS = Path(__file__).resolve().parent / "data" / "numbers"
RARE = {"9", "nine", "nineteen", "ninety"}   # the tokens rare in the numbers set's training

TINY_GENERATOR = {"model.hidden": 32, "model.embed": 16, "model.attdim": 16,
                  "train.batch_size": 32, "train.threads": 1}


@pytest.fixture(scope="module")
def data():
    return compgen.load(NUMBERS / "parquet")


def test_every_api_function_is_exported():
    # importing a submodule binds it on the package: no API function may share its name
    import compgen.evaluation.evaluate
    import compgen.export

    for name in compgen.__all__:
        assert callable(getattr(compgen, name)) or name == "__version__", name
    assert "stem_corrupt" in compgen.__all__
    package = Path(compgen.__file__).parent
    assert not [n for n in compgen.__all__ if (package / f"{n}.py").exists()
                or (package / n).is_dir()]


def test_csl_on_a_dataframe_gives_novel_rows(data):
    rows = compgen.csl(data, 30, steps=20, seed=1)
    assert rows.columns == ["x", "y", "split"] and 0 < rows.height <= 30
    assert set(rows["split"]) == {"csl"}
    train = set(map(tuple, data.filter(pl.col("split") == "train")
                    .select(pl.concat_list("x", pl.lit("|"), "y")).to_series().to_list()))
    pairs = [tuple(x + ["|"] + y) for x, y in rows.select("x", "y").iter_rows()]
    assert len(set(pairs)) == len(pairs) and not set(pairs) & train   # dedup: novel, distinct


def test_stem_corrupt_keeps_affixes_and_tags():
    gold = pl.DataFrame({
        "lemma": ["hablar", "cantar", "bailar", "caminar", "comprar", "trabajar"],
        "form": ["hablamos", "cantamos", "bailamos", "caminamos", "compramos", "trabajamos"],
        "tags": [["V", "IND", "PRS", "1", "PL"]] * 6})
    pool = compgen.stem_corrupt(gold, 40, seed=3, iterations=3)
    assert pool.columns == ["lemma", "form", "tags"] and pool.height == 40
    assert set(pool["tags"]) == {"V;IND;PRS;1;PL"}
    for lemma, form, _ in pool.iter_rows():   # the same stem change on both sides
        assert lemma.endswith("r") and form.endswith("mos") and lemma[:-1] == form[:-3]
    assert set(pool["lemma"]) - set(gold["lemma"])   # stems were changed
    again = compgen.stem_corrupt(gold.with_columns(pl.col("tags").list.join(";")), 40, seed=3,
                                 iterations=3)
    assert again.equals(pool)   # tags as text or list; same seed, same pool
    with pytest.raises(UserError, match="no tags column"):
        compgen.stem_corrupt(gold.drop("tags"), 5)


def test_kenlm_train_and_perplexity(tmp_path, data):
    corpus = tmp_path / "words.txt"
    corpus.write_text("".join(" ".join(y) + "\n" for y in data["y"].to_list()))
    model = compgen.kenlm_train(corpus, tmp_path / "words.arpa", order=3, discount_fallback=True)
    assert Path(model).is_file()
    seen = compgen.perplexity(model, ["three hundred forty seven", "nine"])
    scrambled = compgen.perplexity(model, pl.Series(["seven forty hundred three", "hundred"]))
    assert math.isfinite(seen) and 1 < seen < scrambled


def test_predictor_trains_with_augmentation_and_evaluates(tmp_path, data):
    extra = compgen.geca(data, n_sample=40)
    assert extra.height > 0 and set(extra["split"]) == {"geca"}
    summary = compgen.train_predictor(data, tmp_path / "p.pt", augment=extra, epochs=1)
    assert summary["epochs"] == 1 and 0.0 <= summary["dev_exact_match"] <= 1.0
    scores = compgen.evaluate_model(tmp_path / "p.pt", data)
    assert "exact_match" in scores.columns and scores.height >= 1
    assert 0.0 <= scores["exact_match"][0] <= 1.0


def test_generator_trains_exports_and_samples_on_two_backends(tmp_path, data):
    result = compgen.train_generator(data, tmp_path / "g.pt", epochs=1, overrides=TINY_GENERATOR)
    assert result.finished and result.steps > 0 and (tmp_path / "g.pt").is_file()
    manifest = compgen.export_model(tmp_path / "g.pt", tmp_path / "exported", parity_sets=8,
                              max_prototypes=300)
    assert manifest["kind"] == "recombine"
    moved = tmp_path / "elsewhere"
    shutil.move(tmp_path / "exported", moved)   # sampling an export needs no data set
    drawn = {}
    for backend in ("onnx", "cpp"):
        rows = compgen.sample(moved, 5, backend=backend, seed=2, max_rounds=8, threads=1,
                              raise_temperature=True)
        assert rows.columns == ["x", "y", "split"] and set(rows["split"]) <= {"sample"}
        drawn[backend] = rows
    assert drawn["onnx"].equals(drawn["cpp"])   # same seed, same samples on both runtimes
    eager = compgen.sample(tmp_path / "g.pt", 3, seed=2, max_rounds=8, threads=1,
                           raise_temperature=True)
    for rows in (drawn["onnx"], eager):   # --rare auto: every sample holds a rare token
        assert all(set(x + y) & RARE for x, y in rows.select("x", "y").iter_rows())
    assert eager.height <= 3
    with pytest.raises(UserError, match="a seq2seq preset"):
        compgen.train_generator(data, tmp_path / "h.pt", config="seq2seq_scan_cpu")


def test_augment_rows_given_as_a_table_train_as_the_same_rows_in_a_file(tmp_path, data):
    # a DataFrame goes to the trainer as rows (no file written and read back); the
    # checkpoint names them by digest, and they train exactly as the same rows in a file
    from compgen.io import write_samples_tsv
    from compgen.training.predictor import TABLE_RECORD, load_predictor

    extra = compgen.geca(data, n_sample=40)
    path = tmp_path / "extra.tsv"
    write_samples_tsv(path, list(zip(extra["x"].to_list(), extra["y"].to_list())))
    runs = {}
    for name, augment in (("table", extra), ("file", path)):
        out = tmp_path / f"{name}.pt"
        compgen.train_predictor(data, out, augment=augment, epochs=1, p_aug=0.3)
        runs[name] = load_predictor(out)
    (table_model, _, table_run), (file_model, _, file_run) = runs["table"], runs["file"]
    assert table_run["augment"].startswith(f"{TABLE_RECORD} sha256:")
    assert file_run["augment"] == str(path)
    assert table_run["n_augmented"] == file_run["n_augmented"] > 0
    for name, weights in table_model.state_dict().items():
        assert torch.equal(weights, file_model.state_dict()[name]), name
    # resuming it from the command line cannot find those rows: said, not a missing file
    from compgen.errors import SettingError
    from compgen.training.predictor import train_predictor

    with pytest.raises(SettingError, match="given as a table"):
        train_predictor(None, None, tmp_path / "table.pt", resume=True)
