"""R&R generators on the user's own x<TAB>y data (tests/data/numbers): similarity-based
neighbourhoods, a checkpoint that carries what sampling needs, export and sampling on
every backend without the data file, and reports judged by an oracle."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compgen.data import load_dataset
from compgen.data.resample import any_token_rule, rare_tokens
from compgen.neighborhoods import unique_generative_data
from compgen.neighborhoods.generic import generic_neighborhood, generic_omega, prototype_lengths

TESTS = Path(__file__).parent
NUMBERS = TESTS / "data" / "numbers"
ORACLE = f"{sys.executable} {NUMBERS / 'number_words.py'}"
COMPGEN = [sys.executable, "-m", "compgen"]
NUMBER_RARE = ["9", "nine", "nineteen", "ninety"]


def run_cli(*args, cwd=None):
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(COMPGEN + [str(a) for a in args], capture_output=True, text=True,
                          check=False, env=env, timeout=900, cwd=cwd)


def one_error_line(result, *fragments):
    assert result.returncode == 2, result.stderr
    lines = [line for line in result.stderr.splitlines()   # less the --raise-temperature notice
             if line.strip() and not line.startswith("no new samples for")]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def numbers():
    return unique_generative_data(load_dataset(str(NUMBERS / "tsv" / "train.tsv")))


def _sets(triples, column):
    return [set(t) for t in triples[column].to_list()]


@pytest.mark.parametrize("similarity", ["levenshtein", "jaccard"])
def test_long_short_second_prototype_supplies_what_the_first_lacks(numbers, similarity):
    triples = generic_neighborhood(numbers, seed=0, variant="long-short", similarity=similarity)
    assert triples.height > len(numbers)  # several prototype pairs per datum
    lengths = {tuple(d): len(d) for d in numbers}
    for x, xp, xpp, row in zip(_sets(triples, "x"), _sets(triples, "xp"), _sets(triples, "xpp"),
                               triples.iter_rows()):
        assert row[0] != row[1] and row[0] != row[2] and row[1] != row[2]
        assert x - xp and (x - xp) <= xpp
        if similarity == "jaccard":
            assert len(x & xp) / len(x | xp) > 0.5
    # the second prototypes are short: the shortest data covering what is missing
    assert np.mean([lengths[tuple(p)] for p in triples["xpp"].to_list()]) < \
        np.mean([lengths[tuple(p)] for p in triples["xp"].to_list()]) - 2


def test_long_long_prototypes_lack_few_types_and_cover_each_other(numbers):
    triples = generic_neighborhood(numbers, seed=0, variant="long-long", max_missing=2)
    assert triples.height > 0
    per_x = triples.group_by("x").len()["len"]
    assert per_x.max() <= 9
    for x, xp, xpp in zip(_sets(triples, "x"), _sets(triples, "xp"), _sets(triples, "xpp")):
        assert 1 <= len(x - xp) <= 2 and (x - xp) <= xpp


def test_neighborhood_is_fixed_by_the_seed(numbers):
    a, b = (generic_neighborhood(numbers, seed=3) for _ in range(2))
    c = generic_neighborhood(numbers, seed=4)
    assert a.equals(b) and not a.equals(c)


def test_rare_tokens_of_the_numbers_data():
    table = load_dataset(str(NUMBERS / "tsv" / "train.tsv"))
    pairs = list(zip(table["x"].to_list(), table["y"].to_list()))
    assert rare_tokens(pairs) == NUMBER_RARE
    rule = any_token_rule(["nine"])
    assert rule(["1"], ["nine"]) and not rule(["1"], ["one"])


def test_rare_omega_tuples_all_hold_a_rare_token(numbers):
    triples = generic_neighborhood(numbers, seed=0)
    omega = generic_omega(numbers, 2, "long-short", prototype_lengths(triples), "mean+std",
                          rare=NUMBER_RARE, rng=0)
    assert 0 < len(omega) < len(numbers) ** 2
    for xp, xpp in omega.sample(len(omega)):
        assert xp != xpp and set(xp + xpp) & set(NUMBER_RARE)


# ------------------------------------------------------------------ bad input

def test_a_corpus_is_no_generator_data(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("one two three\nfour five\nsix\n")
    one_error_line(run_cli("train", "generator", "--data", corpus, "-o", tmp_path / "g.pt"),
                   "corpus.txt", "empty input or output")
    assert not (tmp_path / "g.pt").exists()


def test_unknown_neighborhood_is_refused(tmp_path):
    one_error_line(run_cli("train", "generator", "--data", NUMBERS / "tsv" / "train.tsv",
                           "--neighborhood", "near", "-o", tmp_path / "g.pt"), "--neighborhood")


# ------------------------------------------------------------------ end to end

@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny generator trained on the numbers file, exported (ONNX, TorchScript, C++
    checked), both moved to a folder where the data file is not."""
    work = tmp_path_factory.mktemp("numbers")
    ckpt = work / "numbers.pt"
    result = run_cli("train", "generator", "--data", NUMBERS / "tsv" / "train.tsv", "-o", ckpt,
                     "--epochs", 1, "--hidden", 32, "--embed", 16, "--attdim", 16,
                     "--batch-size", 32, "--threads", 1, "--quiet")
    assert result.returncode == 0, result.stderr
    result = run_cli("export", ckpt, "-o", work / "exported", "--parity-sets", 16,
                     "--prototypes", 1000)
    assert result.returncode == 0, result.stderr + result.stdout
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    shutil.move(ckpt, elsewhere / "numbers.pt")
    shutil.move(work / "exported", elsewhere / "exported")
    return elsewhere


def test_checkpoint_records_what_sampling_needs(trained):
    from compgen.training.checkpoint import load_checkpoint

    config = load_checkpoint(trained / "numbers.pt").config
    snapshot = config["data_snapshot"]
    assert len(snapshot["pairs"]) == 732 and snapshot["rare"] == NUMBER_RARE
    assert snapshot["neighborhood"] == "long-short"
    assert set(snapshot["prototype_lengths"]) == {"xp", "xpp"}


SAMPLE_ARGS = ("--n", 20, "--nsamples", 20, "--batch-size", 64, "--max-rounds", 8,
               "--rare", "auto", "--oracle", ORACLE, "--seed", 5, "--threads", 1,
               "--raise-temperature")   # a 1-epoch toy generator: beam search alone finds few


def test_sample_checkpoint_and_export_without_the_data(trained):
    outputs = {}
    for name, source, backend in (("torch", "numbers.pt", "torch"),
                                  ("onnx", "exported", "onnx"), ("cpp", "exported", "cpp")):
        out = trained / f"{name}.tsv"
        result = run_cli("sample", source, "--backend", backend, "-o", out, *SAMPLE_ARGS,
                         cwd=trained)
        assert result.returncode == 0, result.stderr
        assert out.is_file()
        assert "correct by the oracle" in result.stdout and "SCAN" not in result.stdout
        assert "with a rare token (4: 9, nine, nineteen, ninety) 100.0%" in result.stdout
        outputs[name] = out.read_text()
        rows = [line.split("\t") for line in outputs[name].splitlines() if line[:1] != "#"]
        assert rows and all(set((x + " " + y).split()) & set(NUMBER_RARE) for x, y, *_ in rows)
    assert outputs["onnx"] == outputs["cpp"]  # same seed, same samples on both runtimes


def test_oracle_problems_stop_before_sampling(trained, tmp_path):
    one_error_line(run_cli("sample", trained / "numbers.pt", "--oracle", "no-such-oracle-x"),
                   "--oracle", "no-such-oracle-x")
    liar = tmp_path / "liar.py"
    liar.write_text("import sys\nfor line in sys.stdin:\n    print('maybe')\n")
    one_error_line(run_cli("sample", trained / "exported", "--oracle", f"{sys.executable} {liar}",
                           "--n", 2, "--nsamples", 2, "--batch-size", 64, "--max-rounds", 8,
                           "--seed", 5, "--threads", 1, "--raise-temperature"),
                   "one 1 or 0 per input line")
    one_error_line(run_cli("sample", trained / "numbers.pt", "--rare", "zebra", "--n", 5),
                   "--rare zebra", "not a token")
