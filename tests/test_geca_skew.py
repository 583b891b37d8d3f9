"""GECA's candidate joins with a heavily skewed environment class (one window shared by
most templates): the candidates stored once per class give the draws of the plain
per-key definition, the class's keys are cut between partitions, and the partitioned
output is the in-memory one."""

import random
from collections import defaultdict

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compgen.augment.geca import Execution, GecaConfig, geca_augment
from compgen.augment.geca.candidates import (
    DistinctTries,
    KeyCandidates,
    _uniform,
    draw,
    join_tables,
    partition_candidates,
)
from compgen.augment.geca.extraction import encode
from compgen.augment.geca.partitions import assign_partitions, key_costs
from compgen.augment.geca.synthesis import _extract_in_memory
from compgen.data.table import make_table

NOUNS = [f"n{i}" for i in range(14)]
TAILS = [f"t{i}" for i in range(40)]
WORDS = ["the", "a", "cat", "dog", "sang", "ran", "of"]


def skewed_corpus(seed: int, n_tails: int) -> list[list[str]]:
    """'we saw the NOUN of the TAIL today' for a random subset of nouns per tail (so the
    window 'saw the _ of the' holds most templates, each with its own fragment set),
    plus a few random sentences."""
    rng = random.Random(seed)
    corpus = [["we", "saw", "the", noun, "of", "the", tail, "today"]
              for tail in TAILS[:n_tails] for noun in rng.sample(NOUNS, rng.randint(1, 6))]
    corpus += [rng.choices(WORDS, k=rng.randint(3, 6)) for _ in range(10)]
    return corpus


LM_LIKE = {"wug_size": 2, "wug_count": 1, "template_sim": "window", "sim_window_size": 2,
           "output_only": True}


def _tables(corpus, cfg):
    table = make_table([[] for _ in corpus], corpus, "train")
    c = encode(table, cfg)
    joins = _extract_in_memory(c, cfg, {}, lambda msg: None, lambda: 0.0)[-1]
    ta_t, ta_f, n_t, env, frag_grams, ok_t, _ = joins
    return join_tables(ta_t, ta_f, n_t, env, frag_grams), ok_t


def _plain_draws(tables, ok_t, variants, seed):
    """The definition, one key at a time: E's candidates are the fragments of the T1
    classes sharing a fragment with E, each counted with the class's template count;
    the key drops those that are one of own or share a span gram with every one of own;
    draws without replacement from that multiset laid out by fragment."""
    a_sets, a_weight = defaultdict(set), {}
    for a, f, w in tables.a_members.iter_rows():
        a_sets[a].add(f)
        a_weight[a] = w
    e_sets = defaultdict(set)
    for e, f in tables.e_members.iter_rows():
        e_sets[e].add(f)
    grams = tables.frag_grams

    def shares(x, y):
        return any(gx == gy and gx >= 0 for gx in grams[x] for gy in grams[y])

    rows = set()
    for t, e, own in tables.templates.iter_rows():
        if not ok_t[t]:
            continue
        owns = tables.own_f[tables.own_start[own]: tables.own_start[own + 1]].tolist()
        count = defaultdict(int)
        for a, fs in a_sets.items():
            if fs & e_sets[e]:
                for f in fs:
                    count[f] += a_weight[a]
        cands = [(f, count[f]) for f in sorted(count)
                 if f not in owns and not all(shares(f, b) for b in owns)]
        if variants is None:
            rows |= {(t, f, i) for i, (f, _) in enumerate(cands)}
            continue
        left = [list(fc) for fc in cands]
        for r in range(variants):
            total = sum(c for _, c in left)
            if total <= 0:
                break
            point = int(np.floor(_uniform(np.array([t]), r, seed)[0] * total))
            for item in left:
                if point < item[1]:
                    rows.add((t, item[0], r))
                    item[1] -= 1
                    break
                point -= item[1]
    return rows


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n_tails=st.integers(5, 40),
       variants=st.sampled_from([None, 1, 2, 3]), window=st.sampled_from(["none", "window"]))
def test_candidates_stored_per_class_draw_what_the_per_key_definition_draws(seed, n_tails, variants,
                                                                            window):
    cfg = GecaConfig(**{**LM_LIKE, "template_sim": window}, variants=variants, seed=seed % 4)
    tables, ok_t = _tables(skewed_corpus(seed, n_tails), cfg)
    kc = partition_candidates(tables.templates, tables.e_members, tables.a_members,
                              tables.own_start, tables.own_f, tables.frag_grams)
    rows = set(zip(*(a.tolist() for a in draw(kc, ok_t, variants, cfg.seed))))
    assert rows == _plain_draws(tables, ok_t, variants, cfg.seed)
    assert rows


def test_the_skewed_class_is_cut_between_partitions():
    cfg = GecaConfig(**LM_LIKE, variants=1)
    tables, _ = _tables(skewed_corpus(0, 40), cfg)
    per_e = (key_costs(tables).group_by("E").agg(pl.len().alias("keys"), pl.col("cost").sum())
             .sort("keys", descending=True))
    big_e, big_keys, big_cost = per_e.row(0)
    assert big_keys >= 30 and per_e["keys"].median() <= 3   # a class far above the rest
    n_parts = 2 * int(per_e["cost"].sum()) // big_cost + 1           # it cannot fit one
    keys, n = assign_partitions(tables, n_parts, Execution(partitions=n_parts))
    assert n_parts - 2 <= n <= n_parts
    assert keys.filter(pl.col("E") == big_e)["part"].n_unique() > 1


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), n_tails=st.integers(5, 40), parts=st.integers(2, 40),
       shards=st.integers(1, 4), variants=st.sampled_from([None, 1, 2]),
       n_sample=st.sampled_from([None, 7]))
def test_partitioned_equals_in_memory_with_one_skewed_class(tmp_path, seed, n_tails, parts, shards,
                                                            variants, n_sample):
    cfg = GecaConfig(**LM_LIKE, variants=variants, n_sample=n_sample, seed=seed % 3)
    corpus = skewed_corpus(seed, n_tails)
    table = make_table([[] for _ in corpus], corpus, "train")
    whole = geca_augment(table, cfg, execution=Execution())
    split = geca_augment(table, cfg, execution=Execution(partitions=parts, shards=shards,
                                                         spill_dir=tmp_path))
    assert whole.table.height > 0
    assert split.table.to_dicts() == whole.table.to_dicts()
    assert (split.templates, split.fragments) == (whole.templates, whole.fragments)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seed", range(5))
def test_a_run_of_distinct_candidates_skips_the_dropped_ones(seed):
    """``novel_variants``' draw on keys that drop candidates: the run of each template
    is taken from its key's list with the dropped candidates left out, as a list written
    out per key would give it."""
    rng = np.random.default_rng(seed)
    n_keys, stride = 6, 1000
    sizes = rng.integers(1, 12, n_keys)
    lo = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    hi = lo + sizes
    f = rng.permutation(int(sizes.sum())) + 100
    drops = sorted(k * stride + p for k in range(n_keys) for p in range(lo[k], hi[k])
                   if rng.random() < 0.4)
    t = np.arange(20)
    key = rng.integers(0, n_keys, len(t))
    kc = KeyCandidates(f, np.ones_like(f), lo, hi, np.asarray(drops, np.int64), stride, t, key)
    tries = 3
    got_t, got_f, _ = draw(kc, np.ones(len(t), bool), DistinctTries(tries), seed)
    dropped = set(drops)
    for template in t:
        k = key[template]
        kept = [f[p] for p in range(lo[k], hi[k]) if k * stride + p not in dropped]
        mine = got_f[got_t == template].tolist()
        assert len(mine) == min(tries, len(kept))
        if kept:
            start = kept.index(mine[0])
            assert mine == [kept[(start + w) % len(kept)] for w in range(len(mine))]
