"""Batched decoding strategies, sample collection, resampling filters, sample CLI."""

import itertools
import subprocess
from pathlib import Path

import pytest
import torch

from compgen.data.resample import (
    SampleFilter,
    contains_rule,
    is_novel,
    min_frequency_rule,
    rare_tag_rule,
    rare_tags,
    split_datum,
    split_morph,
    unique_pairs,
    valid_morph,
)
from compgen.data.vocab import EOS_ID, PAD_ID, SEP, Vocab
from compgen.decoding.contract import rank_key
from compgen.decoding.options import SampleOptions
from compgen.errors import UserError
from compgen.models.recombine import Recombine, RecombineConfig, collate_prototypes
from compgen.runtimes.eager import beam_search, decode_batch
from compgen.sampling.eager import collect_eager, sample_checkpoint
from compgen.training.checkpoint import save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
COMPGEN = str(ROOT / ".venv" / "bin" / "compgen")
torch.set_num_threads(1)

WORDS = ["walk", "jump", "run", "twice", "and", "I_WALK", "I_JUMP", "I_RUN"]


def model_and_vocab(outdrop_test=True, variant="scan", nproto=2, seed=0):
    torch.manual_seed(seed)
    vocab = Vocab.build([WORDS])
    cfg = RecombineConfig(variant=variant, vocab_size=len(vocab), nproto=nproto, hidden=32,
                          embed=16, attdim=16 if variant == "scan" else 32, zdim=2, kpos=4,
                          outdrop_test=outdrop_test)
    return Recombine(cfg).eval(), vocab


def protos_tensor(vocab, n=6):
    tuples = [[["walk", "twice", SEP, "I_WALK", "I_WALK"], ["jump", SEP, "I_JUMP"]]] * n
    return collate_prototypes([[vocab.encode(p) for p in t] for t in tuples], "scan", 45)


@pytest.mark.parametrize("strategy", ["greedy", "temperature", "mixed", "beam"])
def test_same_seed_same_samples(strategy):
    model, vocab = model_and_vocab(outdrop_test=True)  # test-time dropout: stochastic
    protos = protos_tensor(vocab)
    runs = []
    for _ in range(2):
        torch.manual_seed(123)
        dec = decode_batch(model, protos, strategy, temperature=1.0, max_len=12)
        runs.append((dec.tokens.clone(), dec.scores.clone()))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])


def test_greedy_is_stepwise_argmax_and_scores_add_up():
    model, vocab = model_and_vocab(outdrop_test=False)
    protos = protos_tensor(vocab, 3)
    dec = decode_batch(model, protos, "greedy", max_len=10)
    # replay the decoder on the chosen tokens: each is the argmax among allowed tokens
    memory, state = model.encode(protos, model.prior_z(3), 10)
    token = torch.full((3,), 1)
    total = torch.zeros(3)
    live = torch.ones(3, dtype=torch.bool)
    from compgen.runtimes.eager import banned_mask
    for t in range(dec.tokens.size(1)):
        logp, state = model.decode_step(token, state, memory)
        logp = logp.masked_fill(banned_mask(model.vocab_size, t == 0), float("-inf"))
        chosen = dec.tokens[:, t]
        assert torch.equal(chosen[live], logp.argmax(1)[live])
        total += torch.where(live, logp.gather(1, chosen[:, None])[:, 0], torch.zeros(3))
        live &= chosen != EOS_ID
        token = chosen
    assert torch.allclose(total, dec.scores, atol=1e-4)
    # after </s> only padding
    for row in dec.tokens.tolist():
        if EOS_ID in row:
            assert all(t == PAD_ID for t in row[row.index(EOS_ID) + 1:])


def test_beam_returns_sorted_hypotheses_and_beats_greedy():
    model, vocab = model_and_vocab(outdrop_test=False)
    protos = protos_tensor(vocab, 4)
    hyps, scores = beam_search(model, protos, width=4, max_len=10)
    assert hyps.shape == (4, 4, 10) and scores.shape == (4, 4)
    assert (scores[:, :-1] >= scores[:, 1:]).all()
    assert torch.isfinite(scores).all()
    greedy = decode_batch(model, protos, "greedy", max_len=10)
    finished = (greedy.tokens == EOS_ID).any(1)
    assert (scores[finished, 0] >= greedy.scores[finished] - 1e-4).all()
    # the four hypotheses of one example are distinct
    for b in range(4):
        assert len({tuple(h) for h in hyps[b].tolist()}) == 4


def test_mixed_is_greedy_after_separator():
    model, vocab = model_and_vocab(outdrop_test=False, variant="sig", nproto=1)
    protos = collate_prototypes([[vocab.encode(["walk", "twice", SEP, "I_WALK"])]] * 16, "sig", 45)
    torch.manual_seed(0)
    dec = decode_batch(model, protos, "mixed", temperature=5.0, max_len=12)
    # replay: every token after the first <sep> is the argmax
    memory, state = model.encode(protos, model.prior_z(16), 12)
    from compgen.runtimes.eager import banned_mask
    token, after, live = torch.full((16,), 1), torch.zeros(16, dtype=torch.bool), torch.ones(16, dtype=torch.bool)
    sep_id = vocab.index[SEP]
    for t in range(dec.tokens.size(1)):
        logp, state = model.decode_step(token, state, memory)
        logp = logp.masked_fill(banned_mask(model.vocab_size, t == 0), float("-inf"))
        chosen = dec.tokens[:, t]
        check = after & live
        assert torch.equal(chosen[check], logp.argmax(1)[check])
        after |= chosen == sep_id
        live &= chosen != EOS_ID
        token = chosen


def test_collect_eager_keeps_unique_novel_ranked_samples():
    model, vocab = model_and_vocab(outdrop_test=True)
    train = [(WORDS, WORDS), (["walk"], ["I_WALK"]), (["jump"], ["I_JUMP"])]  # every token known
    filt = SampleFilter.from_pairs(train, novel=True)
    draw = lambda k: [(["walk", "twice", SEP, "I_WALK", "I_WALK"], ["jump", SEP, "I_JUMP"])] * k
    torch.manual_seed(0)
    samples = collect_eager(model, vocab, draw,
                            SampleOptions(n=5, nsamples=8, strategy="temperature", temperature=2.0,
                                          batch_size=32, max_rounds=30),
                            filt.accept, log=lambda s: None)
    assert 0 < len(samples) <= 5
    keys = [(tuple(s.x), tuple(s.y)) for s in samples]
    assert len(set(keys)) == len(keys)
    for s in samples:
        assert is_novel(s.x, s.y, {tuple(x) for x, _ in train}, {tuple(y) for _, y in train})
    # best first by the score rounded to 1e-4 (the decoding contract's ranking)
    assert all(rank_key(a.logprob) <= rank_key(b.logprob) for a, b in itertools.pairwise(samples))
    assert all(a.logprob >= b.logprob - 1e-4 for a, b in itertools.pairwise(samples))


def test_filters_and_rare_rules():
    assert split_datum(["jump", SEP, "I_JUMP"]) == (["jump"], ["I_JUMP"])
    assert split_datum(["jump", "I_JUMP"]) is None
    assert split_datum([SEP, "I_JUMP"]) is None
    assert split_datum(["a", SEP, "b", SEP, "c"]) is None
    train = [(["walk"], ["I_WALK"]), (["jump"], ["I_JUMP"])]
    f = SampleFilter.from_pairs(train, novel=True, rule=contains_rule("jump"))
    assert f.accept(["jump", "twice", SEP, "I_JUMP", "I_JUMP"]) is None  # 'twice' unknown
    f = SampleFilter.from_pairs(train + [(["walk", "twice"], ["I_WALK", "I_WALK"])],
                                novel=True, rule=contains_rule("jump"))
    assert f.accept(["jump", "twice", SEP, "I_JUMP", "I_JUMP"]) is not None
    assert f.accept(["jump", "twice", SEP, "I_JUMP", "I_JUMP"]) is None  # not unique
    assert f.accept(["walk", "twice", SEP, "I_WALK", "I_JUMP"]) is None  # rule: no jump
    assert f.accept(["jump", SEP, "I_WALK", "I_WALK"]) is None  # input not novel
    assert contains_rule("around right")(["walk", "around", "right"], [])
    assert not contains_rule("around right")(["walk", "right", "around"], [])
    assert unique_pairs([(["a"], ["b"]), (["a"], ["b"]), (["a"], ["c"])]) == [(["a"], ["b"]), (["a"], ["c"])]
    # morphology: lemma + tags
    x = list("gel") + ["V", "PST", "3", "SG"]
    assert split_morph(x) == (list("gel"), ["V", "PST", "3", "SG"])
    assert valid_morph(x, {"V", "PST", "3", "SG"})
    assert not valid_morph(list("gel") + ["V", "V"], {"V"})
    assert not valid_morph(list("gel"), {"V"})
    tags = [["V", "PST"], ["V", "PST"], ["V", "FUT"], ["N", "SG"]] + [["V", "3"]] * 30
    assert rare_tags(tags) == {"PST"}
    assert rare_tag_rule({"PST", "FUT"})(list("gel") + ["V", "FUT"], list("gelecek"))
    assert not rare_tag_rule({"PST", "FUT"})(list("gel") + ["V", "PRS"], list("gelir"))
    rule = min_frequency_rule([["a", "a", "a", "b"]], eps=0.3)
    assert rule(["b"], []) and not rule(["a"], ["a"])


def test_sample_cli_bad_input(tmp_path):
    def run(*args):
        return subprocess.run([COMPGEN, "sample", *map(str, args)], capture_output=True, text=True, check=False)

    model, vocab = model_and_vocab()
    wrong = tmp_path / "wrong.pt"
    save_checkpoint(wrong, model, {"model": {}}, vocab, kind="seq2seq")
    r = run(wrong)
    assert r.returncode == 2 and "'seq2seq' checkpoint" in r.stderr and "Traceback" not in r.stderr
    with pytest.raises(UserError, match="no such checkpoint"):
        sample_checkpoint(tmp_path / "missing.pt", 5)
    good = tmp_path / "good.pt"
    save_checkpoint(good, model, {"model": {"variant": "scan", "nproto": 2}, "data": "scan/jump"},
                    vocab, kind="recombine")
    with pytest.raises(UserError, match="strategy nucleus"):
        sample_checkpoint(good, 5, strategy="nucleus")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint at all")
    with pytest.raises(UserError, match="not a compgen checkpoint"):
        sample_checkpoint(tmp_path / "junk.pt", 5)
