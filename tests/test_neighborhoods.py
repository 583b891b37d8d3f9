"""Neighbourhoods: hand-computed toys, reductions, Omega filters, SCAN jump at scale."""

import itertools

import numpy as np
import polars as pl
import pytest

from compgen import neighborhoods as nb
from compgen.data import load_dataset
from compgen.data.vocab import SEP
from compgen.neighborhoods import omega_scan
from compgen.neighborhoods.random_keys import hash_keys


def seqs(*words):
    return [w.split() for w in words]


def triple_set(df, names):
    """Triples as tuples of names (each token list mapped back to its toy name)."""
    back = {tuple(v): k for k, v in names.items()}
    return {
        (back[tuple(a)], back[tuple(b)], back[tuple(c)])
        for a, b, c in df.select("x", "xp", "xpp").iter_rows()
    }


def test_generative_datum():
    assert nb.generative_datum(["jump", "twice"], ["I_JUMP", "I_JUMP"]) == [
        "jump",
        "twice",
        SEP,
        "I_JUMP",
        "I_JUMP",
    ]


# Long-long toy, worked by hand (sim = 1 - lev / max length; cands need 0.5 < sim < 1 and
# exactly one token type of x missing from the candidate):
#   X  = a b c d e    cands L1, L2, L3 (sim .8); L5 is excluded (nothing of X missing)
#   L1 = a b c d f    cands X (.8), L2 (.6)   [L3 lacks 2 types, L5 lacks none]
#   L2 = a b c f e    cands X (.8), L1 (.6)
#   L3 = a b g d e    cands X (.8), L5 (.67): neither has g -> no second prototype
#   L5 = a b c d f e  cands X, L1, L2 (5/6 each)
# second prototypes of (x, xp): other candidates containing setdiff(x, xp).
LONG_LONG = dict(
    zip(
        ["X", "L1", "L2", "L3", "L5"],
        seqs("a b c d e", "a b c d f", "a b c f e", "a b g d e", "a b c d f e"),
    )
)
LONG_LONG_EXPECTED = (
    {("X", p, q) for p, q in itertools.permutations(["L1", "L2", "L3"], 2)}
    | {("L1", "X", "L2"), ("L1", "L2", "X"), ("L2", "X", "L1"), ("L2", "L1", "X")}
    | {("L5", p, q) for p, q in itertools.permutations(["X", "L1", "L2"], 2)}
)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_long_long_toy_by_hand(seed):
    got = nb.long_long_neighborhood(list(LONG_LONG.values()), seed)
    assert got.height == len(LONG_LONG_EXPECTED)
    assert triple_set(got, LONG_LONG) == LONG_LONG_EXPECTED


def test_long_long_test_queries_are_padded():
    trn = [LONG_LONG[k] for k in ("L1", "L2", "L3", "L5")]
    far = seqs("z z z z z z z")[0]  # no candidate at all
    got = nb.long_long_neighborhood(trn, 0, queries=[LONG_LONG["X"], far])
    far_rows = got.filter(pl.col("x") == pl.lit(far, dtype=pl.List(pl.String)))
    assert far_rows.height == 1  # one random xp, one random xpp


# Long-short toy: X1 has one first prototype P1 (sim 5/7); d = setdiff(X1, P1) = [u, w]
# is close (sim 2/3) to the five short items, which are all second prototypes. Because
# the first-stage counter is not reset, one first prototype means the cap of 3 is hit
# after 2 second prototypes; with 3 first prototypes the cap never applies (3 x 5).
SHORT = seqs("u w a", "u w b", "u w c", "a u w", "u a w")
X1 = ["p", "q", "r", "s", "t", "u", "w"]


def rows_of(df, x):
    return df.filter(pl.col("x") == pl.lit(x, dtype=pl.List(pl.String)))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_long_short_counter_quirk(seed):
    p1 = ["p", "q", "r", "s", "t", "y", "y"]
    got = rows_of(nb.long_short_neighborhood([X1, p1] + SHORT, seed), X1)
    assert got.height == 2
    assert all(xp == p1 for xp in got["xp"].to_list())
    assert {tuple(s) for s in got["xpp"].to_list()} <= {tuple(s) for s in SHORT}

    firsts = seqs("p q r s t y y", "p q r s t y z", "p q r s t z z")
    got = rows_of(nb.long_short_neighborhood([X1] + firsts + SHORT, seed), X1)
    pairs = {(tuple(a), tuple(b)) for a, b in got.select("xp", "xpp").iter_rows()}
    assert pairs == {(tuple(f), tuple(s)) for f in firsts for s in SHORT}


def test_long_short_single_token_difference_has_no_second():
    data = seqs("a b c d", "a b c e", "a b f d", "a b c g", "a b h d")
    got = nb.long_short_neighborhood(data, 0)
    assert got.height == 0  # every difference is one token; no datum is that short


TRIPLES = pl.DataFrame(
    {
        "x": seqs("a", "a", "a", "b"),
        "xp": seqs("p", "p", "q", "p"),
        "xpp": seqs("s", "t", "s", "s"),
    },
    schema=nb.TRIPLE_SCHEMA,
)


def test_prototype_sets_reductions():
    zero = nb.prototype_sets(TRIPLES, 0)
    assert zero["x"].to_list() == [["a"], ["b"]] and zero["protos"].to_list() == [[], []]
    one = nb.prototype_sets(TRIPLES, 1)
    assert one.rows() == [(["a"], [["p"]]), (["a"], [["q"]]), (["b"], [["p"]])]
    two = nb.prototype_sets(TRIPLES, 2)
    assert two.height == 4 and two["protos"][1].to_list() == [["p"], ["t"]]
    with pytest.raises(ValueError):
        nb.prototype_sets(TRIPLES, 3)


def brute_force_omega(data, p_cut, pp_cut, template):
    out = set()
    for i, j in itertools.permutations(range(len(data)), 2):
        short = len(data[i]) <= p_cut and len(data[j]) <= pp_cut
        if short and (not template or len(set(data[i]) - set(data[j])) == 1):
            out.add((i, j))
    return out


@pytest.mark.parametrize("split_kind", ["jump", "around_right"])
def test_scan_omega_filters_match_brute_force(split_kind):
    rng = np.random.default_rng(5)
    data = [list(rng.choice(list("abcdef"), size=rng.integers(1, 7))) for _ in range(60)]
    data = [list(d) for d in dict.fromkeys(tuple(d) for d in data)]
    triples = pl.DataFrame(
        {"x": data[:10], "xp": data[10:20], "xpp": data[20:30]}, schema=nb.TRIPLE_SCHEMA
    )
    p_cut = triples["xp"].list.len().mean()
    pp_cut = triples["xpp"].list.len().mean()
    expected = brute_force_omega(data, p_cut, pp_cut, split_kind == "around_right")
    omega = nb.scan_omega(data, triples, 2, split_kind, rng=0)
    assert len(omega) == len(expected)
    i, j = omega.indices(len(expected))  # one full cycle = every valid pair once
    assert set(zip(i.tolist(), j.tolist())) == expected
    i2, j2 = omega.indices(len(expected))  # the next cycle repeats the same order
    assert (i2 == i).all() and (j2 == j).all()

    wide = nb.scan_omega(data, triples, 2, split_kind, rng=0, threshold="mean+std")
    assert len(wide) > len(omega)
    uncut = nb.scan_omega(data, triples, 2, split_kind, rng=0, threshold="none")
    i, j = uncut.indices(len(uncut))
    assert set(zip(i.tolist(), j.tolist())) == brute_force_omega(
        data, max(map(len, data)), max(map(len, data)), split_kind == "around_right")
    single = nb.scan_omega(data, triples, 1, split_kind, rng=0)
    assert len(single) == sum(len(d) <= p_cut for d in data)
    assert all(len(t) == 1 and len(t[0]) <= p_cut for t in single.sample(20))

    # --rare-prototypes: exactly the valid tuples whose prototypes contain "a" and "b"
    # between them (brute force), for pairs and for single prototypes
    covering = nb.scan_omega(data, triples, 2, split_kind, rng=0, cover=["a", "b"])
    wanted = {(a, b) for a, b in expected if {"a", "b"} <= set(data[a]) | set(data[b])}
    assert 0 < len(covering) == len(wanted) < len(omega)
    i, j = covering.indices(len(wanted))
    assert set(zip(i.tolist(), j.tolist())) == wanted
    single_covering = nb.scan_omega(data, triples, 1, split_kind, rng=0, cover=["a", "b"])
    assert len(single_covering) == sum(len(d) <= p_cut and {"a", "b"} <= set(d) for d in data)
    with pytest.raises(ValueError, match="z: not in the training data"):
        nb.scan_omega(data, triples, 2, split_kind, rng=0, cover=["a", "z"])


def test_lazy_omega_samples_only_valid_pairs(monkeypatch):
    rng = np.random.default_rng(1)
    data = [list(rng.choice(list("abcdefgh"), size=rng.integers(2, 6))) for _ in range(80)]
    data = [list(d) for d in dict.fromkeys(tuple(d) for d in data)]
    triples = pl.DataFrame(
        {"x": data[:5], "xp": data[:5], "xpp": data[5:10]}, schema=nb.TRIPLE_SCHEMA
    )
    monkeypatch.setattr(omega_scan, "EXACT_CYCLE_LIMIT", 10)  # force the with-replacement path
    omega = nb.scan_omega(data, triples, 2, "around_right", rng=3)
    for a, b in omega.sample(300):
        assert a != b and len(set(a) - set(b)) == 1


@pytest.fixture(scope="module")
def jump():
    table = load_dataset("scan/jump")
    return table, nb.scan_neighborhood(table, "jump", seed=0, use_cache=False)


def test_scan_jump_triples_near_reference_counts(jump):
    table, triples = jump
    # Appendix A (re-implementation with another RNG): 38,614 triples, 9,081 distinct x
    assert abs(triples.height - 38614) <= 0.1 * 38614
    assert abs(triples["x"].n_unique() - 9081) <= 0.1 * 9081
    assert not triples.filter(
        pl.col("xp").list.contains("jump") | pl.col("xpp").list.contains("jump")
    ).height
    train = {tuple(d) for d in nb.unique_generative_data(table)}
    assert len(train) == 13204
    sample = triples.sample(300, seed=0)
    for x, xp, xpp in sample.iter_rows():
        assert tuple(x) in train and tuple(xp) in train and tuple(xpp) in train
        assert 0.5 < sim(x, xp) < 1
        d = [t for t in dict.fromkeys(x) if t not in set(xp)]
        assert sim(d, xpp) > 0.5


def sim(a, b):
    from rapidfuzz.distance import Levenshtein

    return 1 - Levenshtein.distance(a, b) / max(len(a), len(b))


def test_scan_jump_omega_sizes(jump):
    table, triples = jump
    omega = nb.scan_omega(nb.unique_generative_data(table), triples, 2, "jump", rng=0)
    assert len(omega.second) == 15  # the primitives, `jump -> I_JUMP` among them
    assert ["jump", SEP, "I_JUMP"] in [omega.data[j] for j in omega.second]
    assert len(omega) == len(omega.first) * 15 - np.isin(omega.first, omega.second).sum()


def test_scan_neighborhood_cache(tmp_path):
    from compgen.data.table import make_table

    names = list(LONG_LONG)
    table = make_table(
        [LONG_LONG[k] for k in names] + [["q", "r"]], [["Y"]] * 6, ["train"] * 5 + ["test"]
    )
    first = nb.scan_neighborhood(table, "around_right", 0, cache_dir=tmp_path)
    files = list((tmp_path / "neighborhoods").glob("*.parquet"))
    assert len(files) == 1
    assert nb.scan_neighborhood(table, "around_right", 0, cache_dir=tmp_path).equals(first)
    assert first.equals(nb.scan_neighborhood(table, "around_right", 0, use_cache=False))
    files[0].write_bytes(b"garbage")  # a broken file is recomputed
    assert nb.scan_neighborhood(table, "around_right", 0, cache_dir=tmp_path).equals(first)
    test = nb.scan_neighborhood(table, "around_right", 0, part="test", cache_dir=tmp_path)
    assert test["x"].to_list() == [["q", "r", SEP, "Y"]]  # no candidate: padded at random
    assert len(list((tmp_path / "neighborhoods").glob("*.parquet"))) == 2


# Direct transcriptions of the two SCAN procedures, item by item, walking the same random
# order the vectorised builders use (candidates sorted by their hash key): the outputs
# must be identical, order included.


def perm_of(seed, stream, i, n):
    return list(np.argsort(hash_keys(seed, stream, np.full(n, i), np.arange(n)), kind="stable"))


def setdiff(a, b):
    return [t for t in dict.fromkeys(a) if t not in set(b)]


def direct_long_short(trn, seed, queries=None):
    qs, stream = (trn, 0) if queries is None else (queries, 1)
    out = []
    for i, x in enumerate(qs):
        perm = perm_of(seed, stream, i, len(trn))
        first, cnt = [], 0
        for j in perm:
            if 0.5 < sim(x, trn[j]) < 1:
                first.append(j)
                cnt += 1
                if cnt == 5:
                    break
        if not first:
            first = [perm[0]]
        for n in first:
            d = setdiff(x, trn[n])
            for l in perm:
                if l != n and l != i and d and sim(d, trn[l]) > 0.5:
                    out.append((x, trn[n], trn[l]))
                    cnt += 1
                    if cnt == 3:
                        break
    return out


def direct_long_long(trn, seed, queries=None):
    is_test = queries is not None
    qs, stream = (queries, 2) if is_test else (trn, 3)
    out = []
    for i, x in enumerate(qs):
        perm = perm_of(seed, stream, i, len(trn))
        cands = []
        for j in perm:
            if not is_test and j == i:
                continue
            s = sim(x, trn[j])
            if 0.5 < s < 1 and len(setdiff(x, trn[j])) == 1:
                cands.append((j, s))
                if len(cands) == 10:
                    break
        if not cands:
            if not is_test:
                continue
            cands = [(perm[0], 2.0)]
        cands = [j for j, _ in sorted(cands, key=lambda c: -c[1])]
        for a, n in enumerate(cands[:3]):
            d = setdiff(x, trn[n])
            seconds = [
                l
                for l in cands
                if l != n and l != i and sim(x, trn[l]) > 0.5 and not setdiff(d, trn[l])
            ]
            if seconds:
                out += [(x, trn[n], trn[l]) for l in seconds[:3]]
            elif is_test:
                pad = int(hash_keys(seed, stream + 4, i * 3 + a, 0) % np.uint64(len(trn)))
                out.append((x, trn[n], trn[pad]))
    return out


def random_data(seed, n, alphabet="abcdefg", lengths=(2, 9)):
    rng = np.random.default_rng(seed)
    data = [list(rng.choice(list(alphabet), size=rng.integers(*lengths))) for _ in range(n)]
    return [list(d) for d in dict.fromkeys(tuple(d) for d in data)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_long_short_equals_direct_procedure(seed):
    trn = random_data(seed, 120)
    test = random_data(seed + 10, 30)
    for queries in (None, test):
        got = nb.long_short_neighborhood(trn, seed, queries=queries)
        assert got.rows() == direct_long_short(trn, seed, queries)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_long_long_equals_direct_procedure(seed):
    trn = random_data(seed, 150, alphabet="abcdef", lengths=(4, 9))
    test = random_data(seed + 10, 30, alphabet="abcdefgh", lengths=(4, 9))
    for queries in (None, test):
        got = nb.long_long_neighborhood(trn, seed, queries=queries)
        expected = direct_long_long(trn, seed, queries)
        assert len(expected) > 20
        assert got.rows() == expected


def test_a_cached_neighbourhood_file_cut_short_is_recomputed(tmp_path, capsys):
    """A readable Parquet file holding fewer triples (cut, or another run's) does not
    match the record written with the cache entry: recomputed, with a note, not used."""
    from compgen.data.table import make_table

    names = list(LONG_LONG)
    table = make_table([LONG_LONG[k] for k in names], [["Y"]] * 5, ["train"] * 5)
    first = nb.scan_neighborhood(table, "around_right", 0, cache_dir=tmp_path)
    (cached,) = (tmp_path / "neighborhoods").glob("*.parquet")
    first.head(1).write_parquet(cached)   # a valid file, two rows short
    again = nb.scan_neighborhood(table, "around_right", 0, cache_dir=tmp_path)
    assert again.equals(first) and first.height > 1
    assert "the cached neighbourhoods" in capsys.readouterr().err
