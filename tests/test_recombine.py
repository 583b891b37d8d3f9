"""The Recombine generator: distributions, copying, overfitting, VAE."""

import math

import pytest
import torch

from compgen.data.vocab import BOS_ID, Vocab
from compgen.models.recombine import (
    Recombine,
    RecombineConfig,
    collate_prototypes,
    collate_targets,
)
from compgen.models.vmf import vmf_kl
from compgen.runtimes.eager import decode_batch

torch.set_num_threads(1)


def tiny(variant="scan", nproto=2, copy=True, vae=False, vocab_size=20, hidden=32, **kw):
    cfg = RecombineConfig(variant=variant, vocab_size=vocab_size, nproto=nproto, copy=copy,
                          vae=vae, hidden=hidden, embed=16,
                          attdim=16 if variant == "scan" else hidden, zdim=2, kpos=4, **kw)
    return Recombine(cfg)


def random_batch(model, B=4, T=6, Tp=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    V, K = model.vocab_size, model.nproto
    protos = torch.randint(6, V, (B, K, Tp), generator=g) if K else torch.zeros(B, 0, 1, dtype=torch.long)
    if K:
        protos[0, :, 3:] = 0  # padding
    target = torch.randint(6, V, (B, T), generator=g)
    target[:, 0], target[:, -1] = BOS_ID, 2
    return target, protos


@pytest.mark.parametrize("variant", ["scan", "sig"])
@pytest.mark.parametrize("nproto", [0, 1, 2])
@pytest.mark.parametrize("copy", [True, False])
def test_step_distributions_sum_to_one(variant, nproto, copy):
    torch.manual_seed(0)
    model = tiny(variant, nproto, copy).eval()
    target, protos = random_batch(model)
    memory, state = model.encode(protos, model.prior_z(4), 8)
    token = target[:, 0]
    for t in range(5):
        logp, state = model.decode_step(token, state, memory)
        assert logp.shape == (4, model.vocab_size)
        assert torch.allclose(logp.exp().sum(1), torch.ones(4), atol=1e-4)
        token = target[:, t + 1]
    model.train()
    loss, _, ntok = model.loss(target, protos)
    assert torch.isfinite(loss) and loss > 0 and int(ntok) == 4 * 5


@pytest.mark.parametrize("copy", [True, False])
def test_sig_token_only_in_prototype_needs_copying(copy):
    """With its write probability forced to ~0, a token gets mass only if copying is on
    and the token sits in a prototype."""
    torch.manual_seed(0)
    model = tiny("sig", 1, copy).eval()
    rare = 19
    with torch.no_grad():
        model.output.bias[rare] = -1e4
    protos_with = torch.tensor([[[7, 8, rare, 9]]])
    protos_without = torch.tensor([[[7, 8, 10, 9]]])
    probs = []
    for protos in (protos_with, protos_without):
        memory, state = model.encode(protos, model.prior_z(1), 4)
        logp, _ = model.decode_step(torch.tensor([BOS_ID]), state, memory)
        probs.append(float(logp[0, rare].detach().exp()))
    assert probs[1] < 1e-5
    if copy:
        assert probs[0] > 1e-4
    else:
        assert probs[0] < 1e-5


def copy_task(n=32, seed=0):
    """Data d = p: learn to copy the prototype. Tokens 6..13 only; 14 never seen."""
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(6, 14, (int(torch.randint(2, 5, (1,), generator=g)),), generator=g).tolist()
            for _ in range(n)]
    return seqs


def overfit(model, seqs, steps=90):
    targets = collate_targets(seqs, model.cfg.variant, 45)
    protos = collate_prototypes([[s] for s in seqs], model.cfg.variant, 45)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for _ in range(steps):
        loss, nll, ntok = model.loss(targets, protos)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        _, nll, ntok = model.loss(targets, protos)
    return float(nll) / int(ntok)


def test_overfit_copy_task_and_copy_of_unseen_token():
    """A tiny copying model overfits a tiny data set to near-zero loss, then copies a
    token it never saw in training; the no-copy ablation trained the same way cannot."""
    seqs = copy_task()
    unseen = [[6, 14, 7], [14, 8, 9], [10, 11, 14]]
    protos = collate_prototypes([[s] for s in unseen], "scan", 45)
    emitted = {}
    for copy in (True, False):
        torch.manual_seed(0)
        model = tiny("scan", 1, copy, pdrop=0.0, outdrop=0.0, outdrop_test=False, writedrop=0.5)
        per_token = overfit(model, seqs)
        if copy:
            assert per_token < 0.05, per_token
        torch.manual_seed(0)
        dec = decode_batch(model, protos, "greedy", max_len=8)
        emitted[copy] = bool((dec.tokens == 14).any())
        if copy:  # copies the whole prototype, unseen token included
            for row, src in zip(dec.tokens.tolist(), unseen):
                assert row[: len(src) + 1] == src + [2]
    assert emitted[True] and not emitted[False]


def test_vae_kl_and_latent():
    torch.manual_seed(0)
    for variant, kappa, max_norm, eps in (("scan", 25.0, 10.0, 1.0), ("sig", 1.0, 1.0, 0.9)):
        model = tiny(variant, 2, True, vae=True, kappa=kappa, max_norm=max_norm, eps=eps)
        kl = model.kl()
        assert math.isfinite(kl) and kl >= 0
        target, protos = random_batch(model)
        loss, _, _ = model.loss(target, protos)
        loss.backward()
        assert model.z_emb.weight.grad is not None and torch.isfinite(model.z_emb.weight.grad).all()
        z = model.prior_z(64)
        assert z.shape == (64, 4) and (z.norm(dim=1) <= max_norm + 1e-5).all()
    # larger kappa concentrates more: larger KL from the uniform
    assert vmf_kl(25.0, 32) > vmf_kl(1.0, 32) >= 0


def test_vocab_specials_match_model_masks():
    v = Vocab.build([["walk", "<sep>", "I_WALK"]])
    assert v.tokens[:6] == ["<pad>", "<s>", "</s>", "<unk>", "<sep>", "<copy>"]
