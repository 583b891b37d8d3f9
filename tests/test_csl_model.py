"""CSL model: inside algorithm vs brute-force enumeration, Viterbi parsing, training,
sampling limits."""

import collections
import math

import numpy as np
import pytest
import torch

from compgen.augment.csl.chart import RuleIndex, parse
from compgen.augment.csl.forest import build_forest, context_offsets, pack
from compgen.augment.csl.model import ModelConfig, QcfgModel, inside, train_model, viterbi_parse
from compgen.augment.csl.rules import is_nt, nt_index, parse_rule
from compgen.augment.csl.sampler import QcfgSampler, SamplerConfig, uniform_weights

TINY = ["walk ### W", "run ### R", "walk twice ### W W", "NT_1 twice ### NT_1 NT_1",
        "NT_1 and NT_2 ### NT_1 NT_2", "NT_1 NT_2 ### NT_1 NT_2"]


def tiny_rules():
    return sorted(parse_rule(line) for line in TINY)


def brute_force(tokens, rules, scores, offsets, ctx=0):
    """{target: total probability} over every derivation of ``tokens`` in context ``ctx``,
    by direct recursion over rules and splits (no chart)."""
    out = collections.defaultdict(float)
    for rid, rule in enumerate(rules):
        p_rule = math.exp(scores[ctx, rid])
        for split in _splits(rule.source, tokens):
            child_dists = [brute_force(span, rules, scores, offsets, int(offsets[rid]) + k)
                           for k, span in enumerate(split)]
            for combo in _product([list(d.items()) for d in child_dists]):
                target, p = [], p_rule
                for t in rule.target:
                    target.extend(combo[nt_index(t) - 1][0].split() if is_nt(t) else [t])
                for _, q in combo:
                    p *= q
                out[" ".join(target)] += p
    return out


def _product(lists):
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head,) + rest


def _splits(source, tokens):
    """Ways to match a rule source to all of ``tokens``: the token spans of its NTs."""
    if not source:
        if not tokens:
            yield ()
        return
    if not is_nt(source[0]):
        if tokens and tokens[0] == source[0]:
            yield from _splits(source[1:], tokens[1:])
        return
    for end in range(1, len(tokens) + 1):
        for rest in _splits(source[1:], tokens[end:]):
            yield (tuple(tokens[:end]),) + rest


@pytest.mark.parametrize("source, target", [
    ("walk twice", "W W"),
    ("walk and run twice", "W R R"),
    ("walk and run twice", "W R W R"),
    ("walk twice run", "W W R"),
    ("walk run and walk twice", "W R W W"),
])
def test_inside_matches_brute_force_enumeration(source, target, one_torch_thread):
    rules = tiny_rules()
    model = QcfgModel(rules, ModelConfig(num_types=3, num_lhs_emb=8, num_rhs_emb=8, seed=3))
    with torch.no_grad():
        model.context_logits.normal_(0, 1.0)
        model.rule_logits.normal_(0, 1.0)
        scores = model.scores().double()
    offsets = context_offsets(rules)
    expected = brute_force(tuple(source.split()), rules, scores.numpy(), offsets)[target]
    assert expected > 0
    forest = build_forest(source.split(), target.split(), RuleIndex(rules), offsets)
    got = inside(scores, pack([forest]))
    assert got.item() == pytest.approx(math.log(expected), rel=1e-9, abs=1e-9)
    # a batch of several forests gives the same values as one by one
    other = build_forest(["walk"], ["W"], RuleIndex(rules), offsets)
    both = inside(scores, pack([other, forest, other]))
    assert both[1].item() == pytest.approx(got.item(), rel=1e-12)
    assert both[0].item() == pytest.approx(scores[0, rules.index(parse_rule("walk ### W"))].item())


def test_no_forest_without_a_derivation():
    rules = tiny_rules()
    assert build_forest(["walk", "twice"], ["W", "R"], RuleIndex(rules), context_offsets(rules)) is None


def test_viterbi_follows_the_scores():
    rules = tiny_rules()
    index, offsets = RuleIndex(rules), context_offsets(rules)
    n_ctx = 1 + sum(r.arity for r in rules)
    and_rule = rules.index(parse_rule("NT_1 and NT_2 ### NT_1 NT_2"))
    twice = rules.index(parse_rule("NT_1 twice ### NT_1 NT_1"))
    scores = np.full((n_ctx, len(rules)), math.log(0.1))
    # inside "and", prefer twice below; at the root prefer "and" -> walk and (run twice)
    scores[0, and_rule] = math.log(0.9)
    scores[offsets[and_rule] + 1, twice] = math.log(0.9)
    scores[offsets[twice], and_rule] = math.log(0.01)
    assert viterbi_parse(["walk", "and", "run", "twice"], index, scores, offsets) == "W R R"
    scores[0, twice] = math.log(0.95)
    scores[offsets[twice], and_rule] = math.log(0.95)
    scores[offsets[and_rule] + 1, twice] = math.log(0.001)
    assert viterbi_parse(["walk", "and", "run", "twice"], index, scores, offsets) == "W R W R"
    assert viterbi_parse(["jump"], index, scores, offsets) is None


def test_training_raises_the_likelihood_and_learns_to_parse(one_torch_thread):
    rules = sorted(parse_rule(x) for x in ["walk ### W", "run ### R", "NT_1 twice ### NT_1 NT_1",
                                           "NT_1 and NT_2 ### NT_1 NT_2"])
    pairs = [("walk and run twice", "W R R"), ("walk twice and run", "W W R"), ("run twice", "R R"),
             ("walk and walk twice", "W W W"), ("run and walk", "R W"), ("walk twice", "W W")]
    cfg = ModelConfig(num_types=2, batch_size=4, training_steps=150, learning_rate=0.05)
    model = QcfgModel(rules, cfg)
    index = RuleIndex(model.rules)
    forests = [build_forest(x.split(), y.split(), index, model.offsets) for x, y in pairs]
    log = train_model(model, forests, cfg)
    assert np.mean(log.losses[-10:]) < np.mean(log.losses[:10]) - 0.5
    scores = model.scores().detach().numpy()
    # "twice" never takes an "and" phrase in training: the parser attaches it low
    assert viterbi_parse(["run", "and", "walk", "twice"], index, scores, model.offsets) == "R W W"


def test_sampling_respects_the_depth_limits():
    rules = sorted(parse_rule(x) for x in ["a ### A", "NT_1 b ### NT_1 B"])
    weights = uniform_weights(rules, SamplerConfig())
    for lo, hi in [(1, 3), (0, 0), (2, 2), (0, 5)]:
        sampler = QcfgSampler(rules, weights, SamplerConfig(min_recursions=lo, max_recursions=hi, seed=1))
        counts = collections.Counter(x.count("b") for x, _ in sampler.samples(400))
        assert min(counts) == lo and max(counts) == hi
        assert len(counts) == hi - lo + 1


def test_samples_are_derivations_of_the_grammar():
    rules = tiny_rules()
    sampler = QcfgSampler(rules, uniform_weights(rules, SamplerConfig()), SamplerConfig(seed=2))
    index = RuleIndex(rules)
    samples = sampler.samples(200)
    for x, y in samples:
        gold = " ".join(y)
        assert gold in parse(x, index, keep=gold.__contains__).top_targets()
    assert len({tuple(x) for x, _ in samples}) > 20
    distinct = QcfgSampler(rules, uniform_weights(rules, SamplerConfig()), SamplerConfig(seed=2)).samples(30, dedup=True)
    assert len({(tuple(x), tuple(y)) for x, y in distinct}) == 30


def test_model_weights_bias_nt_rules():
    from compgen.augment.csl.sampler import model_weights

    rules = tiny_rules()
    model = QcfgModel(rules, ModelConfig(num_types=2, num_lhs_emb=6, num_rhs_emb=6))
    plain = model_weights(model, SamplerConfig())
    biased = model_weights(model, SamplerConfig(nonterminal_bias=3.0, min_nonterminal_rule_arity=2))
    assert plain.shape == (1 + sum(r.arity for r in rules), len(rules))
    two = [i for i, r in enumerate(rules) if r.arity >= 2]
    odds = lambda w: w[0, two].sum() / (w[0].sum() - w[0, two].sum())
    # per latent state the odds grow by exactly e^3; the mixture over states blurs it slightly
    assert odds(biased) / odds(plain) == pytest.approx(math.exp(3.0), rel=0.02)


def test_a_higher_sampling_temperature_flattens_every_context_toward_uniform():
    from compgen.augment.csl.sampler import model_weights

    rules = tiny_rules()
    model = QcfgModel(rules, ModelConfig(num_types=2, num_lhs_emb=6, num_rhs_emb=6, seed=3))
    with torch.no_grad():   # a peaked model: the initial logits are nearly flat already
        model.rule_logits.mul_(100.0)
        model.context_logits.mul_(100.0)

    def entropy(t):
        w = model_weights(model, SamplerConfig(temperature=t))
        p = w / w.sum(axis=1, keepdims=True)
        return -(p * np.log(p)).sum(axis=1)

    cold, warm, hot = entropy(1.0), entropy(3.0), entropy(1000.0)
    assert (cold < warm).all() and (warm < hot).all()
    assert hot == pytest.approx(np.full_like(hot, math.log(len(rules))), rel=1e-3)


def test_joint_sampling_keeps_targets_in_the_target_cfg():
    from compgen.augment.csl.joint_sampler import JointSampler, rule_signatures
    from compgen.augment.csl.rules import Rule
    from compgen.augment.csl.target_cfg import CfgRule

    cfg_rules = [CfgRule(lhs, tuple(rhs.split())) for lhs, rhs in [
        ("ROOT", "##F"), ("F", "##N"), ("F", "##N ( ##F )"), ("N", "a"), ("N", "b")]]
    rules = sorted(parse_rule(x) for x in ["x ### a", "y ### b", "NT_1 of NT_2 ### NT_1 ( NT_2 )",
                                           "NT_1 and NT_2 ### NT_1 NT_2", "NT_1 wrap ### NT_1 ( a )"])
    sigs = {str(r): rule_signatures(r, cfg_rules) for r in rules}
    assert sigs["NT_1 and NT_2 ### NT_1 NT_2"] == set()             # never well formed: dropped
    assert sigs["NT_1 wrap ### NT_1 ( a )"] == {("F", "N"), ("ROOT", "N")}
    assert ("F", "N", "F") in sigs["NT_1 of NT_2 ### NT_1 ( NT_2 )"]
    sampler = JointSampler(rules, uniform_weights(rules, SamplerConfig()),
                           SamplerConfig(min_recursions=1, max_recursions=4, seed=3), cfg_rules)
    assert sampler.dropped == 1
    seen = set()
    for _ in range(300):
        x, y = sampler.sample()
        seen.add(" ".join(x))
        assert "and" not in x
        assert ("ROOT",) in rule_signatures(Rule(tuple(x), tuple(y), 0), cfg_rules), (x, y)
        assert x.count("of") + x.count("wrap") <= 4 + 5
    assert any("wrap" in s for s in seen) and any("of" in s for s in seen)
    # uniform sampling without the target CFG does produce ill-formed targets
    free = QcfgSampler(rules, uniform_weights(rules, SamplerConfig()), SamplerConfig(seed=3))
    assert any(("ROOT",) not in rule_signatures(Rule(tuple(x), tuple(y), 0), cfg_rules)
               for x, y in free.samples(300))
