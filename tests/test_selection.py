"""The seven selection strategies on a toy pool with known scores."""

from collections import Counter

import numpy as np
import pytest

from compgen.augment.selection import STRATEGIES, select
from compgen.cli.common import flag_of
from compgen.errors import SettingError, UserError

# 3 bundles: A is common (60 rows), B (30), C rare (10); nll known per row
TAGS = ["A"] * 60 + ["B"] * 30 + ["C"] * 10
NLL = np.concatenate([np.linspace(0.0, 1.0, 60), np.linspace(2.0, 3.0, 30), np.linspace(1.5, 1.9, 10)])


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("k", [1, 17, 100])
def test_size_without_duplicates(strategy, k):
    chosen = select(strategy, TAGS, k, NLL, seed=3)
    assert len(chosen) == k == len(set(chosen))
    assert all(0 <= i < len(TAGS) for i in chosen)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_seeded(strategy):
    assert select(strategy, TAGS, 40, NLL, seed=1) == select(strategy, TAGS, 40, NLL, seed=1)


def test_high_and_low_loss_take_the_extremes():
    high = select("highloss", TAGS, 10, NLL)
    low = select("lowloss", TAGS, 10, NLL)
    assert set(high) == set(np.argsort(NLL)[-10:]) and min(NLL[high]) >= 2.0
    assert set(low) == set(range(10))


def test_umt_plus_loss_is_balanced_and_takes_the_highest_loss_of_each_tag():
    chosen = select("umt+loss", TAGS, 30, NLL, seed=0)
    counts = Counter(TAGS[i] for i in chosen)
    assert all(6 <= c <= 14 for c in counts.values())   # uniform over 3 bundles
    for tag in "ABC":
        mine = [i for i in chosen if TAGS[i] == tag]
        rows = [i for i in range(len(TAGS)) if TAGS[i] == tag]
        best = sorted(rows, key=lambda i: -NLL[i])[:len(mine)]
        assert mine == best                              # highest nll first, in order


def test_umt_exhausts_a_rare_bundle_then_draws_among_the_rest():
    chosen = select("umt", TAGS, 90, NLL, seed=2)
    counts = Counter(TAGS[i] for i in chosen)
    assert counts["C"] == 10                             # all of the rare bundle is used
    assert counts["B"] == 30 or counts["A"] >= 30


def test_emt_follows_the_remaining_counts():
    draws = Counter()
    for seed in range(30):
        draws.update(TAGS[i] for i in select("emt", TAGS, 10, NLL, seed=seed))
    share = {t: draws[t] / 300 for t in "ABC"}
    assert 0.5 < share["A"] < 0.7 and share["C"] < 0.2   # ~ 0.6 / 0.3 / 0.1
    uniform = Counter()
    for seed in range(30):
        uniform.update(TAGS[i] for i in select("umt", TAGS, 10, NLL, seed=seed))
    assert uniform["C"] / 300 > 0.25                      # UMT: ~1/3 each


def test_emt_plus_loss_takes_rows_in_nll_order_per_tag():
    chosen = select("emt+loss", TAGS, 25, NLL, seed=4)
    for tag in "ABC":
        mine = [NLL[i] for i in chosen if TAGS[i] == tag]
        assert mine == sorted(mine, reverse=True)


def test_random_is_uniform_over_rows():
    counts = Counter()
    for seed in range(200):
        counts.update(select("random", TAGS, 10, None, seed=seed))
    assert len(counts) == 100 and max(counts.values()) < 45   # expected 20 each


def test_bad_requests():
    with pytest.raises(UserError, match="larger than the pool"):
        select("random", TAGS, 101)
    with pytest.raises(UserError, match="empty"):
        select("random", [], 1)
    with pytest.raises(UserError, match="unknown selection strategy"):
        select("mostloss", TAGS, 5, NLL)
    with pytest.raises(UserError, match="uncertainty scores"):
        select("umt+loss", TAGS, 5, None)
    with pytest.raises(SettingError, match="^size ") as refused:
        select("umt", TAGS, 0)
    assert refused.value.text(flag_of).startswith("--size ")
