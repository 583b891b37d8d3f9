"""SIGMORPHON few-shot splits: every build against the reference figures, the neighbour
procedure against a direct transcription, the reader's lowercasing, cache, errors."""

import json
import os
import shutil
import subprocess
import sys
from collections import Counter

import numpy as np
import polars as pl
import pytest

from compgen import neighborhoods as nb
from compgen.data import load_dataset
from compgen.data import sigmorphon as sg
from compgen.errors import UserError

SIZES = {"train": 1000, "val_easy": 100, "val_hard": 100, "test_easy": 100, "test_hard": 100}
# weird items (training items with a rare tag) per hints: ranges over the 5 splits
WEIRD = {
    "spanish": {4: (8, 8), 8: (16, 16), 16: (32, 32)},
    "swahili": {4: (42, 101), 8: (33, 94), 16: (75, 111)},
    "turkish": {4: (19, 25), 8: (26, 30), 16: (32, 49)},
}
ALWAYS_RARE = {
    "spanish": {"FUT", "PST"},
    "swahili": {"FUT", "N", "NFIN", "PST"},
    "turkish": {"ADJ", "FUT", "PST"},
}
# NOVEL-set sizes (test_hard, val_hard, test_easy) where the reference states them
NOVEL = {
    ("spanish", 4): ((68, 85), (85, 91), (0, 0)),
    ("spanish", 8): ((40, 58), (72, 84), (0, 0)),
    ("spanish", 16): ((18, 53), (42, 61), (0, 0)),
    ("swahili", 8): ((51, 66), (87, 93), (0, 1)),
    ("turkish", 8): ((68, 79), (87, 94), (0, 4)),
}
BUNDLES = {
    "spanish": ((12, 12), (26, 28)),
    "swahili": ((16, 16), (51, 59)),
    "turkish": ((23, 24), (50, 59)),
}


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("fewshot-cache")


def within(value, bounds):
    return bounds[0] <= value <= bounds[1]


@pytest.mark.parametrize("lang", sg.PAPER_LANGUAGES)
def test_every_build_matches_the_reference_figures(lang, data_dir, cache):
    for spec in sg.fewshot_specs():
        hints = int(spec.split("-")[1].split(".")[0])
        build = sg.build_fewshot(lang, spec, data_dir, cache)
        split = build["split"]
        assert split == [s for s, n in SIZES.items() for _ in range(n)]
        by_split = {
            name: [tuple(r[2]) for r, s in zip(build["rows"], split) if s == name] for name in SIZES
        }
        assert len({(r[0], r[1], tuple(r[2])) for r in build["rows"][:1000]}) == 1000
        tags = by_split["train"]
        # the 2h hints are the last training items: h PST, then h FUT
        assert all("PST" in t for t in tags[1000 - 2 * hints : 1000 - hints])
        assert all("FUT" in t for t in tags[1000 - hints :])
        assert not any("PST" in t or "FUT" in t for t in tags[: 1000 - 2 * hints])
        assert all("PST" in t for t in by_split["val_hard"])
        assert all("FUT" in t for t in by_split["test_hard"])
        assert not any(
            "PST" in t or "FUT" in t for t in by_split["val_easy"] + by_split["test_easy"]
        )
        # four prototype pairs per item, all pointing at other training items
        neighbors = np.array(build["neighbors"])
        assert neighbors.shape == (1400, 4, 2)
        assert neighbors.min() >= 0 and neighbors.max() < 1000
        assert not (neighbors == np.arange(1400)[:, None, None]).any()
        rare = set(nb.rare_tags(pl.DataFrame({"tags": [list(t) for t in tags]})))
        weird = sum(bool(rare & set(t)) for t in tags)
        assert within(weird, WEIRD[lang][hints]), (spec, weird)
        expected_rare = ALWAYS_RARE[lang] - (
            {"ADJ"} if (lang, spec) == ("turkish", "hints-16.1") else set()
        )
        assert expected_rare <= rare, (spec, rare)
        if lang == "turkish":
            assert rare <= {"ADJ", "FUT", "PST"}
        bundles = set(tags)
        for name, bounds in zip(("test_hard", "val_hard"), BUNDLES[lang]):
            assert within(len(set(by_split[name])), bounds), (spec, name)
        if (lang, hints) in NOVEL:
            for name, bounds in zip(("test_hard", "val_hard", "test_easy"), NOVEL[lang, hints]):
                novel = sum(t not in bundles for t in by_split[name])
                assert within(novel, bounds), (spec, name, novel)


def test_table_columns(data_dir, cache):
    table = sg.load_fewshot("spanish", "hints-8.2", data_dir, cache_dir=cache)
    assert table.columns == ["x", "y", "split", "lemma", "form", "tags", "neighbors", "index"]
    assert dict(table.group_by("split").len().iter_rows()) == SIZES
    assert table["neighbors"].list.len().unique().to_list() == [4]


def test_reader_splits_lemma_and_tags_exactly(data_dir, cache):
    """After the special lowercasing the lemma/tag split recovers the file's tags for
    every item, and lowercasing never changes a lemma's length (simple case mapping)."""
    for lang in sg.PAPER_LANGUAGES:
        for spec in ("hints-4.0", "hints-16.4"):
            raw = sg.build_fewshot(lang, spec, data_dir, cache)["rows"]
            table = sg.load_fewshot(lang, spec, data_dir, cache_dir=cache)
            assert table["tags"].to_list() == [r[2] for r in raw]
            assert [len(s) for s in table["lemma"].to_list()] == [len(r[0]) for r in raw]
            assert table["x"].to_list() == [
                list(l) + t for l, t in zip(table["lemma"].to_list(), table["tags"].to_list())
            ]
            assert table["y"].to_list() == [list(f) for f in table["form"].to_list()]


def test_lowercasing_rules():
    assert sg.simple_lower("İ") == "i" and "İ".lower() != "i"
    assert sg.simple_lower("I", turkish=True) == "ı" and sg.simple_lower("I") == "i"
    assert sg.special_lowercase(list("Abu Dabili")) == list("abu dabili")
    # first token, tokens up to each space and the token after it; the rest is kept
    assert sg.special_lowercase(["A", "B", " ", "C", "D", "V", "PST"]) == [
        "a",
        "B".lower(),
        " ",
        "c",
        "D",
        "V",
        "PST",
    ]
    assert sg.special_lowercase(list("İngiliz anahtarı"), turkish=True) == list("ingiliz anahtarı")
    assert sg.special_lowercase(list("Iğdır"), turkish=True)[0] == "ı"
    lemma, form, tags = sg.read_fewshot_rows(
        "İngilizceleştirmek", "İngilizceleştireceğim", ["V", "IND", "1", "SG", "FUT"], "turkish"
    )
    assert "".join(lemma) == "ingilizceleştirmek" and form[0] == "i"
    assert tags == ["V", "IND", "1", "SG", "FUT"]


def test_orders_and_dataset_name(data_dir, cache, monkeypatch):
    monkeypatch.setenv("COMPGEN_CACHE", str(cache))
    reinflection = load_dataset("sigmorphon/turkish/hints-8.0", data_dir)
    analysis = sg.load_fewshot("turkish", "hints-8.0", data_dir, order="analysis", cache_dir=cache)
    assert analysis["x"].to_list() == reinflection["y"].to_list()
    assert analysis["y"].to_list() == reinflection["x"].to_list()
    assert reinflection["index"].to_list() == list(range(1400))
    assert (cache / "sigmorphon" / "turkish" / "hints-8.0.json").is_file()


def test_cache_round_trip_and_resume(data_dir, cache, tmp_path):
    full = sg.build_fewshot("spanish", "hints-4.2", data_dir, cache)
    # resume from the saved random states of an earlier build
    folder = tmp_path / "sigmorphon" / "spanish"
    folder.mkdir(parents=True)
    shutil.copy(cache / "sigmorphon" / "spanish" / "hints-4.0.json", folder)
    resumed = sg.build_fewshot("spanish", "hints-4.2", data_dir, tmp_path)
    assert resumed == full
    assert (folder / "hints-4.1.json").is_file()
    # a corrupt cache file is rebuilt, not trusted
    (folder / "hints-4.2.json").write_text("{not json")
    assert sg.build_fewshot("spanish", "hints-4.2", data_dir, tmp_path) == full
    assert json.loads((folder / "hints-4.2.json").read_text()) == full
    table = sg.load_fewshot("spanish", "hints-4.2", data_dir, cache_dir=tmp_path)
    assert table.equals(sg.load_fewshot("spanish", "hints-4.2", data_dir, cache_dir=cache))


@pytest.mark.parametrize("spec", ["hints-5.0", "hints-4.5", "hints-4", "4.0", ""])
def test_bad_spec_is_a_user_error(spec, data_dir, tmp_path):
    with pytest.raises(UserError, match="valid: hints-4.0"):
        sg.load_fewshot("spanish", spec, data_dir, cache_dir=tmp_path)


def test_bad_language_and_order(data_dir, tmp_path):
    with pytest.raises(UserError, match="unknown SIGMORPHON language"):
        sg.load_fewshot("klingon", "hints-4.0", data_dir, cache_dir=tmp_path)
    with pytest.raises(UserError, match="token order"):
        sg.load_fewshot("spanish", "hints-4.0", data_dir, order="sideways", cache_dir=tmp_path)


def test_cli_reports_bad_split_in_one_line(tmp_path):
    env = {**os.environ, "COMPGEN_CACHE": str(tmp_path)}
    run = subprocess.run(
        [sys.executable, "-m", "compgen", "data", "stats", "sigmorphon/turkish/hints-9.9"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert run.returncode == 2
    assert run.stderr.strip().startswith("error: unknown few-shot split 'hints-9.9'")
    assert "Traceback" not in run.stderr


# --------------------------------------------------------------- neighbour procedure


def jaccard(a, b):
    if a == b:
        return 1.0
    if not a or not b:
        return 0.0
    ca, cb = Counter(a), Counter(b)
    return sum((ca & cb).values()) / sum((ca | cb).values())


def direct_neighborhoods(tags, lemmas, n_train, rand, k=4):
    """The procedure written out item by item (the specification's pseudo-code)."""
    out = []
    for i in range(len(tags)):
        m = set(tags[i])
        first = [
            ((len(m ^ set(tags[j])), jaccard(lemmas[i], lemmas[j])), j)
            for j in range(n_train)
            if j != i and not (i % 2 == 0 and set(tags[j]) == m)
        ]
        shuffled = list(first)
        rand.shuffle(shuffled)
        pairs = []
        for _, i1 in sorted(first)[:k]:
            m1 = set(tags[i1])
            second = [
                (len(m1 ^ set(tags[j])), j)
                for j in range(n_train)
                if j not in (i, i1) and set(tags[j]) not in (m, m1) and not (m - m1 - set(tags[j]))
            ]
            if second:
                pairs.append([i1, min(second)[1]])
            else:
                i2 = min(f for f in first if f[1] != i1)[1]
                pairs.append(rand.permutation([i1, i2]).tolist())
        out.append(pairs)
    return out


@pytest.mark.parametrize("seed", [0, 1])
def test_vectorised_neighbourhoods_equal_the_direct_procedure(seed):
    gen = np.random.default_rng(seed)
    alphabet = ["A", "B", "C", "D", "E", "F"]
    tags = [
        sorted(gen.choice(alphabet, size=gen.integers(1, 4), replace=False).tolist())
        for _ in range(70)
    ]
    lemmas = ["".join(gen.choice(list("abcde"), size=gen.integers(1, 6))) for _ in range(70)]
    a, b = np.random.RandomState(seed), np.random.RandomState(seed)
    fast = nb.sig_neighborhoods(tags, lemmas, 50, a)
    assert fast.tolist() == direct_neighborhoods(tags, lemmas, 50, b)
    assert a.randint(1 << 30) == b.randint(1 << 30)  # same random stream consumed


# --------------------------------------------------------------- sampling-time Omega


def test_sig_omega(data_dir, cache):
    table = sg.load_fewshot("turkish", "hints-8.0", data_dir, cache_dir=cache)
    train = table.filter(pl.col("split") == "train")
    rare = set(nb.rare_tags(train))
    assert nb.rare_tags(train, "fixed") == ["FUT", "PST"]
    omega = nb.sig_omega(train, 2, rare_token=True, rng=0)
    assert len(omega) == 400
    i, j = omega.indices(400)
    tags = train["tags"].to_list()
    rounds = np.stack([i, j], 1)[np.argsort(omega._order)].reshape(100, 4, 2)
    for (i1, i2), (_, i3), back2, back3 in rounds:
        assert rare & set(tags[i1]) and i1 not in (i2, i3) and i2 != i3
        assert list(back2) == [i2, i1] and list(back3) == [i3, i1]
    plain = nb.sig_omega(train, 2, rare_token=False, rng=0)
    for a, b in zip(*plain.indices(500)):
        assert 0 < len(set(tags[a]) ^ set(tags[b])) <= 2
    single = nb.sig_omega(train, 1, rng=0)
    assert len(single) == 1000 and all(len(t) == 1 for t in single.sample(5))
    xp, xpp = omega.sample(1)[0]
    assert "<sep>" in xp and "<sep>" in xpp
