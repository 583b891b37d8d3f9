"""Decoding is spent on prototype tuples that can be kept: on an export, the tuples that
hold the rare phrase (by default with --resample rare), each decoded once by a
deterministic strategy; the same samples on every backend."""

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compgen.errors import UserError
from compgen.runtimes.cpp import build_runner
from compgen.sampling.collection import Tally
from compgen.sampling.run import sample_export
from compgen.sampling.tuple_selection import read_prototype_array, select_tuples

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"
VOCAB = {t: i for i, t in enumerate(["<pad>", "<s>", "</s>", "a", "b", "c", "d"])}


def as_array(tuples, width=4):
    """Tuples of id lists -> the padded array an export's prototypes.txt is read into."""
    out = np.zeros((len(tuples), len(tuples[0]), width), dtype=np.int64)
    for i, tup in enumerate(tuples):
        for k, p in enumerate(tup):
            out[i, k, :len(p)] = p
    return out


def literal_selection(tuples, cover):
    """The rule written out: first occurrences whose prototypes hold every cover id."""
    seen, keep = set(), []
    for i, tup in enumerate(tuples):
        key = tuple(tuple(p) for p in tup)
        if key in seen:
            continue
        seen.add(key)
        if all(any(c in p for p in tup) for c in cover):
            keep.append(i)
    return keep


@pytest.mark.parametrize("seed", range(5))
def test_selection_matches_the_rule_written_out(seed):
    rng = random.Random(seed)
    tuples = [[[rng.randrange(3, 7) for _ in range(rng.randrange(1, 4))] for _ in range(2)]
              for _ in range(200)]
    tuples += tuples[:30]  # repeated tuples: decoded once
    cover = rng.sample(["a", "b", "c", "d"], rng.randrange(1, 3))
    got = select_tuples(as_array(tuples), len(tuples), VOCAB, cover)
    assert got.selected.tolist() == literal_selection(tuples, [VOCAB[w] for w in cover])
    everything = select_tuples(as_array(tuples), len(tuples), VOCAB)
    assert everything.selected.tolist() == literal_selection(tuples, [])
    some = select_tuples(as_array(tuples), len(tuples), VOCAB, any_of=cover)
    assert some.selected.tolist() == [i for i in literal_selection(tuples, []) if any(
        VOCAB[w] in p for w in cover for p in tuples[i])]


def test_selection_cycles_and_bounds_a_deterministic_pass():
    tuples = [[[3], [4]], [[5], [6]], [[3], [6]]]
    got = select_tuples(as_array(tuples), 3, VOCAB, ["a"])
    assert got.selected.tolist() == [0, 2]
    assert got.indices(3, 4).tolist() == [2, 0, 2, 0]  # sample i takes selected[i % 2]
    assert got.max_rows("beam", False) == 2 and got.max_rows("greedy", False) == 2
    assert got.max_rows("temperature", False) is None  # new draws in every pass
    assert got.max_rows("beam", True) is None  # may switch to the mixed sampler


def test_a_rare_word_in_no_stored_tuple_is_an_error():
    tuples = [[[3], [4]], [[5], [4]]]
    with pytest.raises(UserError, match="no prototype tuple stored in .* contains it"):
        select_tuples(as_array(tuples), 2, VOCAB, ["d"])
    with pytest.raises(UserError, match="not in the generator's vocabulary"):
        select_tuples(as_array(tuples), 2, VOCAB, ["fly"])


def test_an_unknown_rare_word_on_an_export_is_one_error_line(tmp_path):
    out = tmp_path / "s.tsv"
    done = subprocess.run([sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--n", "5",
                           "--resample", "rare", "--rare", "fly", "-o", str(out)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --rare fly"), done.stderr
    assert not out.exists()


def test_rare_resampling_on_an_export_decodes_only_covering_tuples(tmp_path):
    """Every decoded row comes from a stored tuple that holds 'jump'; with
    --all-prototypes every stored tuple is in the cycle again."""
    tally = Tally()
    run = sample_export(SHIPPED, n=8, backend="onnx", resample="rare", nsamples=8,
                        batch_size=16, seed=0, threads=1, log=lambda m: None, tally=tally)
    stored = (SHIPPED / "prototypes.txt").read_text().splitlines()
    jump = "6"  # the id of 'jump' in the shipped vocabulary
    covering = sum(jump in line.replace("\t", " ").split() for line in stored)
    assert run.tuples == f"{covering:,} of {len(stored):,} prototype tuples"
    assert tally.decoded == 16 * tally.rounds and len(run.samples) == 8
    every = sample_export(SHIPPED, n=1, backend="onnx", resample="rare", nsamples=1,
                          batch_size=128, seed=0, threads=1, log=lambda m: None,
                          rare_prototypes=False, max_rounds=3)
    assert every.tuples == f"{len(stored):,} prototype tuples"


def test_a_deterministic_job_stops_after_one_pass(tmp_path):
    """Greedy decoding of the covering tuples asks for more than they can give: the job
    decodes each selected tuple once and says why it kept fewer; the C++ runner decodes
    exactly the same rows and writes the same file."""
    build_runner(log=lambda m: None)
    covering = sum("6" in line.replace("\t", " ").split()
                   for line in (SHIPPED / "prototypes.txt").read_text().splitlines())
    files = {}
    for backend in ("onnx", "cpp"):
        logged, tally = [], Tally()
        out = tmp_path / f"{backend}.tsv"
        run = sample_export(SHIPPED, n=3000, backend=backend, strategy="greedy",
                            resample="rare", nsamples=3000, batch_size=512, seed=0,
                            threads=1, out=out, log=logged.append, tally=tally)
        assert tally.decoded == covering, backend
        assert tally.rounds == -(-covering // 512), backend
        assert 0 < len(run.samples) < 3000
        assert any("every selected prototype tuple was decoded once" in m for m in logged)
        files[backend] = [line.rsplit("\t", 1)[0] for line in out.read_text().splitlines()]
    # the same samples in the same order (log-probabilities agree within the contract's
    # tolerance: ONNX Runtime and libtorch differ in the last float digits)
    assert files["onnx"] == files["cpp"]


def test_the_stored_tuples_are_read_as_the_row_parser_reads_them():
    """One vectorised parse of prototypes.txt gives the tuples a line-by-line reading gives,
    padded to the contract's width."""
    manifest = json.loads((SHIPPED / "manifest.json").read_text())
    width = manifest["decoding"]["prototype_width"]
    array = read_prototype_array(SHIPPED / "prototypes.txt", 2, width)
    lines = (SHIPPED / "prototypes.txt").read_text().splitlines()
    assert array.shape == (len(lines), 2, width)
    for i in (0, 1, len(lines) // 2, len(lines) - 1):
        expected = [[int(t) for t in field.split()] for field in lines[i].split("\t")]
        assert [row[:len(p)].tolist() for row, p in zip(array[i], expected)] == expected
        assert all((row[len(p):] == 0).all() for row, p in zip(array[i], expected))


def test_a_damaged_prototype_line_is_one_error(tmp_path):
    path = tmp_path / "prototypes.txt"
    path.write_text("4 5 2\t6 2\n4 x 2\t6 2\n")
    with pytest.raises(UserError, match="expected token ids"):
        read_prototype_array(path, 2, 4)
    path.write_text("4 5 2\t6 2\n4 5 2\n")
    with pytest.raises(UserError, match="prototypes.txt:2: expected 2 prototypes"):
        read_prototype_array(path, 2, 4)
