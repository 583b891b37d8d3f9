"""Data layer: named splits, embedded defaults, fetch + checksums, clear errors."""

import os
import shutil
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compgen.data import load_dataset, pairs, select_split
from compgen.data.sources import checksums, fetch
from compgen.data.stats import table_stats
from compgen.data.table import make_table
from compgen.data.vocab import SPECIALS, UNK_ID, Vocab
from compgen.errors import UserError
from compgen.io import atomic_open, read_samples_tsv, write_samples_tsv

COMPGEN = [sys.executable, "-m", "compgen"]


def run_cli(*args, env=None):
    return subprocess.run(COMPGEN + list(args), capture_output=True, text=True, check=False,
                          env={**os.environ, **(env or {})}, timeout=120)


def split_counts(table):
    return dict(table.group_by("split").len().iter_rows())


@pytest.mark.parametrize("name,train,test", [("scan/jump", 14670, 7706),
                                             ("scan/around_right", 15225, 4476)])
def test_scan_split_sizes(data_dir, name, train, test):
    counts = split_counts(load_dataset(name, data_dir))
    assert counts == {"train": train, "test": test}


def test_jump_split_has_single_jump_command(data_dir):
    train = select_split(load_dataset("scan/jump", data_dir), "train")
    jump_inputs = {tuple(x) for x, _ in pairs(train) if "jump" in x}
    assert jump_inputs == {("jump",)}
    stats = table_stats(train).row(0, named=True)
    assert stats["distinct"] == 13204  # the file repeats 'jump -> I_JUMP' 1,467 times


def test_embedded_default_equals_shared_copy(data_dir, tmp_path):
    embedded = load_dataset("scan/around_right", tmp_path)  # empty folder -> embedded copy
    assert embedded.equals(load_dataset("scan/around_right", data_dir))


def test_other_splits_need_the_data_folder(tmp_path):
    with pytest.raises(UserError, match="compgen data fetch scan"):
        load_dataset("scan/length", tmp_path)


def test_cogs_and_lm(data_dir):
    cogs = load_dataset("cogs", data_dir)
    assert split_counts(cogs) == {"train": 24155, "dev": 3000, "test": 3000}
    # variables are joined into one token (x _ 1 -> x_1), as GECA's COGS loader does
    assert any("x_1" in y for y in cogs["y"].head(50).to_list())
    kin = load_dataset("lm/kin", data_dir)
    assert split_counts(kin) == {"train": 3358, "val": 1053, "test": 964}
    assert kin["x"].list.len().max() == 0


def test_sigmorphon_plain_files(data_dir):
    table = load_dataset("sigmorphon/turkish", data_dir)
    assert split_counts(table)["train-high"] == 10000
    row = table.row(0, named=True)
    assert row["x"] == list(row["lemma"]) + row["tags"] and row["y"] == list(row["form"])


def test_unknown_names_list_valid_ones(data_dir):
    with pytest.raises(UserError, match="valid: simple, length, jump"):
        load_dataset("scan/nope", data_dir)
    with pytest.raises(UserError, match="valid: kin, lao, na, tok"):
        load_dataset("lm/xx", data_dir)
    with pytest.raises(UserError, match="no split 'dev'"):
        select_split(load_dataset("scan/jump", data_dir), "dev")


def test_vocab_round_trip(tmp_path, data_dir):
    table = load_dataset("scan/jump", data_dir)
    vocab = Vocab.from_table(table)
    assert tuple(vocab.tokens[: len(SPECIALS)]) == SPECIALS
    assert len(vocab) == len(SPECIALS) + 13 + 6
    vocab.save(tmp_path / "vocab.json")
    again = Vocab.load(tmp_path / "vocab.json")
    assert again == vocab
    x = ["jump", "twice", "zzz"]
    assert vocab.encode(x)[-1] == UNK_ID
    assert vocab.decode(vocab.encode(x[:2], bos=True, eos=True)) == x[:2]


def test_samples_tsv_round_trip(tmp_path):
    rows = [(["jump", "twice"], ["I_JUMP", "I_JUMP"]), ([], ["a", "b"])]
    write_samples_tsv(tmp_path / "s.tsv", rows, scores={"logp": [-1.5, -2.0]})
    assert read_samples_tsv(tmp_path / "s.tsv") == [(list(x), list(y)) for x, y in rows]


def test_atomic_open_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_open(target) as f:
        f.write("half")
        raise RuntimeError("interrupted")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_fetch_from_mirror_verifies(data_dir, tmp_path):
    written = fetch("lm", tmp_path / "data", data_dir)
    expected = [rel for rel in checksums() if rel.startswith("lm/")]
    assert len(written) == len(expected) == 12
    assert split_counts(load_dataset("lm/kin", tmp_path / "data"))["train"] == 3358


def test_fetch_refuses_corrupted_copy(data_dir, tmp_path):
    mirror = tmp_path / "mirror"
    shutil.copytree(data_dir / "cogs", mirror / "cogs")
    path = mirror / "cogs" / "dev.tsv"
    path.chmod(0o644)
    with open(path, "ab") as f:
        f.write(b"tampered\n")
    result = run_cli("data", "fetch", "cogs", "--from", str(mirror), "--data-dir", str(tmp_path / "d"))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "dev.tsv: checksum mismatch" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "d" / "cogs").exists()


def test_cli_stats_reports_split_sizes(data_dir):
    result = run_cli("data", "stats", "scan/jump")
    assert result.returncode == 0, result.stderr
    assert "14,670" in result.stdout and "7,706" in result.stdout
    result = run_cli("data", "stats", "cogs")
    assert "24,155" in result.stdout


@pytest.mark.parametrize("content,message", [
    ("IN: jump OUT: I_JUMP\nIN: walk I_WALK\n", "bad.txt:2: expected 'IN: <command> OUT: <actions>'"),
    ("", "bad.txt: empty file"),
])
def test_cli_bad_file_one_line(tmp_path, content, message):
    bad = tmp_path / "bad.txt"
    bad.write_text(content)
    result = run_cli("data", "stats", str(bad))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]


def test_cli_errors_for_names_and_folders(tmp_path):
    result = run_cli("data", "stats", "scan/nope")
    assert result.returncode == 2 and "valid: simple" in result.stderr
    result = run_cli("data", "stats", "lm/kin", "--data-dir", str(tmp_path / "missing"))
    assert result.returncode == 2 and "--data-dir" in result.stderr and "no such folder" in result.stderr
    result = run_cli("data", "fetch", "imagenet", "--from", str(tmp_path))
    assert result.returncode == 2 and "valid: cogs, geoquery, lm, scan, sigmorphon" in result.stderr


def test_scan_grammar_embedded_copy_equals_shared(data_dir, tmp_path):
    from compgen.data.scan import load_scan_grammar

    shared = load_scan_grammar(data_dir)
    assert len(shared) == 20910
    assert load_scan_grammar(tmp_path) == shared
    assert shared[("jump", "twice")] == ("I_JUMP", "I_JUMP")


def test_samples_tsv_keeps_space_tokens(tmp_path):
    from compgen.io import read_samples_tsv, write_samples_tsv

    pairs = [(["l", "a", " ", "c", "a", "s", "a", "N", "SG"], ["l", "a", " ", "c", "a", "s", "a"])]
    write_samples_tsv(tmp_path / "s.tsv", pairs, {"logprob": [-1.5]})
    assert read_samples_tsv(tmp_path / "s.tsv") == pairs


TOKENS = st.lists(st.sampled_from(["a", "jump", " ", "x y", "", "\x1f", "é", "I_TURN_LEFT"]),
                  max_size=5)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(TOKENS, TOKENS), max_size=6))
def test_make_table_keeps_every_token_list(rows):
    """The table's list columns hold exactly the token lists given: empty rows, empty
    tokens, spaces and the join character included (the fast path joins and splits)."""
    xs, ys = [x for x, _ in rows], [y for _, y in rows]
    table = make_table(xs, ys, "train")
    assert table["x"].to_list() == xs
    assert table["y"].to_list() == ys
