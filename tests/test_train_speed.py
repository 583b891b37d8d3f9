"""The fast generator trainer: length-bucketed batches, the batched teacher-forced loss,
the fast scan loss (distinct prototypes, packed encoder, padding chains, fused decoder:
each checked against Recombine.loss, with and without dropout), the packed LSTM, bf16
autocast and the --precision option."""

import contextlib
import gc
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from compgen.data.vocab import BOS_ID, EOS_ID
from compgen.errors import UserError
from compgen.models import native, scan_decoder, sig_training
from compgen.models.packed_lstm import lstm_directions, packed_index
from compgen.models.recombine import Recombine, RecombineConfig
from compgen.models.scan_training import REFERENCE, TrainingLoss, training_loss
from compgen.system.precision import cpu_computes_bf16, cpu_has_bf16, resolve_precision
from compgen.training.generator_data import epoch_batches

ROOT = Path(__file__).resolve().parents[1]
torch.set_num_threads(1)


@pytest.mark.parametrize("pool", [0, 3, 50])
@pytest.mark.parametrize("n", [1, 37, 200])
def test_every_training_tuple_is_in_exactly_one_batch_per_epoch(pool, n):
    lengths = np.random.default_rng(n).integers(1, 40, n)
    for epoch in range(3):
        batches = epoch_batches(lengths, 8, seed=5, epoch=epoch, pool=pool)
        seen = np.concatenate(batches)
        assert sorted(seen.tolist()) == list(range(n))
        assert len(batches) == math.ceil(n / 8)
        assert sum(len(b) < 8 for b in batches) <= 1  # only one batch may be short
    again = epoch_batches(lengths, 8, seed=5, epoch=2, pool=pool)  # resuming: same order
    assert [b.tolist() for b in again] == [b.tolist() for b in batches]


def test_bucketed_batches_cut_padding():
    lengths = np.random.default_rng(0).integers(1, 46, 3200)

    def padded(batches):
        return sum(len(b) * lengths[b].max() for b in batches)

    plain = padded(epoch_batches(lengths, 32, 0, 0, pool=0))
    bucketed = padded(epoch_batches(lengths, 32, 0, 0, pool=50))
    assert bucketed < 0.7 * plain
    assert padded(epoch_batches(lengths, 32, 0, 0, pool=50)) >= lengths.sum()


def scan_model(**kw):
    cfg = RecombineConfig(**{"variant": "scan", "vocab_size": 20, "nproto": 2, "hidden": 32,
                             "embed": 16, "attdim": 16, "zdim": 2, "kpos": 4, **kw})
    torch.manual_seed(0)
    return Recombine(cfg)


def sig_model(**kw):
    cfg = RecombineConfig(**{"variant": "sig", "vocab_size": 20, "nproto": 1, "hidden": 32,
                             "embed": 16, "attdim": 32, "zdim": 1, "kpos": 0, **kw})
    torch.manual_seed(0)
    return Recombine(cfg)


def fixed_batch(B=6, T=7, Tp=5, seed=0):
    """Targets and prototypes with repeated prototypes and some padding."""
    g = torch.Generator().manual_seed(seed)
    protos = torch.randint(6, 20, (B, 2, Tp), generator=g)
    protos[0, :, 3:] = 0
    protos[3] = protos[1]  # the same prototypes twice, as in training batches
    protos[4, 0] = protos[2, 1]
    target = torch.randint(6, 20, (B, T), generator=g)
    target[:, 0], target[:, -1] = BOS_ID, EOS_ID
    target[1, 4:] = 0
    return target, protos


def test_batched_loss_is_the_sum_of_the_decoder_steps():
    """The loss runs the output layer once over all steps; its NLL must be the one
    decode_step gives step by step (the sampling path)."""
    model = scan_model(outdrop_test=False).eval()
    target, protos = fixed_batch()
    with torch.no_grad():
        _, nll, ntok = model.loss(target, protos)
        memory, state = model.encode(protos, model.prior_z(6), 8)
        stepwise = torch.zeros(())
        for t in range(target.size(1) - 1):
            logp, state = model.decode_step(target[:, t], state, memory)
            gold = target[:, t + 1]
            stepwise -= (logp.gather(1, gold[:, None])[:, 0] * (gold != 0)).sum()
    assert int(ntok) == int((target[:, 1:] != 0).sum())
    assert torch.allclose(nll, stepwise, rtol=1e-5)


LEVERS = [TrainingLoss(), TrainingLoss(pad_chains=2), TrainingLoss(distinct_prototypes=False),
          TrainingLoss(packed_encoder=False), TrainingLoss(fused_decoder=False),
          TrainingLoss(native_loops=False)]


@pytest.mark.parametrize("levers", LEVERS, ids=lambda lv: ",".join(
    f"{k}={v}" for k, v in vars(lv).items() if v != getattr(TrainingLoss(), k)) or "default")
@pytest.mark.parametrize("config", [{}, {"nproto": 1}, {"copy": False}, {"feedcontext": False}],
                         ids=["recomb-2", "recomb-1", "no-copy", "no-feed"])
def test_the_training_loss_levers_give_the_reference_loss_and_gradients(levers, config):
    """Without dropout (where pad_chains > 0 is exact too), every lever computes
    Recombine.loss: the same loss, NLL and gradients up to float rounding."""
    model = scan_model(outdrop_test=False, **config).eval()
    target, protos = fixed_batch()
    protos = protos[:, :model.nproto]
    results = []
    for chosen in (REFERENCE, levers):
        model.zero_grad()
        loss, nll, ntok = training_loss(model, target, protos, chosen)
        loss.backward()
        results.append([loss.detach(), nll, ntok.float()] + [p.grad.clone() for p in model.parameters()])
    for got, want in zip(*results):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-6 * float(want.abs().max()) + 1e-9)


@pytest.mark.parametrize("rows", [1, 16], ids=["running-rows", "all-rows"])
@pytest.mark.parametrize("config", [{}, {"nproto": 2}, {"nproto": 0}, {"copy": False},
                                    {"feedcontext": False}],
                         ids=["recomb-1", "recomb-2", "no-prototype", "no-copy", "no-feed"])
def test_the_sig_training_loss_gives_the_reference_loss_and_gradients(config, rows, monkeypatch):
    """The sig loss with per-step products' gradients summed at the end, over stacked
    decoder states and the running rows only, is Recombine.loss (the sampling step,
    every row every step): same loss, NLL and gradients."""
    monkeypatch.setattr(sig_training, "ROWS", rows)
    model = sig_model(**config).eval()
    target, protos = fixed_batch(T=9)
    target[2, 3:], target[5, 6:] = 0, 0  # three target lengths: the running rows shrink
    protos = protos[:, :model.nproto]
    results = []
    for chosen in (REFERENCE, TrainingLoss()):
        model.zero_grad()
        loss, nll, ntok = training_loss(model, target, protos, chosen)
        loss.backward()
        unused = torch.zeros(())  # no copy: the copy gate gets no gradient from either
        results.append([loss.detach(), nll, ntok.float()] + [
            unused if p.grad is None else p.grad.clone() for p in model.parameters()])
    for got, want in zip(*results):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-6 * float(want.abs().max()) + 1e-9)


@pytest.mark.parametrize("config", [{}, {"nproto": 0}], ids=["recomb-1", "no-prototype"])
def test_the_sig_training_loss_frees_each_update(config):
    """Nothing of an update's graph outlives it: before this held, every fp32 H 1024
    swahili update kept about 250 MB alive (the steps' saved inputs and their graph, a
    cycle through autograd's nodes) until the machine ran out of memory."""
    model = sig_model(**config).train()
    target, protos = fixed_batch(T=9)
    protos = protos[:, :model.nproto]

    def update_then_count():
        loss, _, _ = training_loss(model, target, protos, TrainingLoss())
        loss.backward()
        del loss
        gc.collect()
        return sum(issubclass(type(o), torch.Tensor) for o in gc.get_objects())

    first = update_then_count()
    assert [update_then_count() for _ in range(3)] == [first] * 3


@pytest.mark.parametrize("packed", [False, True], ids=["padded-encoder", "packed-encoder"])
def test_the_fast_loss_applies_the_reference_dropout(packed):
    """In training, with the dropout masks the fast loss drew replayed into the reference
    (the prototypes' embeddings; per decoder step the fed embedding, the output state and
    the fed-back feature, ones for finished rows, which predict nothing), both give the
    same loss and gradients."""
    model = scan_model(writedrop=0.0).train()  # write drop off: the objective is fixed
    target, protos = fixed_batch()
    order = torch.argsort((target != 0).sum(1), descending=True, stable=True)
    target, protos = target[order], protos[order]  # the order the fused decoder runs
    drawn, bernoulli = [], torch.Generator().manual_seed(7)

    def draw(x, p, training=True, inplace=False):
        if not training or p == 0:
            return x
        drawn.append(torch.bernoulli(torch.full(x.shape, 1 - p), generator=bernoulli) / (1 - p))
        return x * drawn[-1]

    def draw_mask(rows, width, p, active):
        return draw(torch.ones(rows, width), p, active) if active and p else None

    def run(levers, dropout):
        model.zero_grad()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(torch.nn.functional, "dropout", dropout)
            patch.setattr(scan_decoder, "dropout_mask", draw_mask)
            loss, nll, _ = training_loss(model, target, protos, levers)
        loss.backward()
        return [loss.detach(), nll] + [p.grad.clone() for p in model.parameters()]

    fused = run(TrainingLoss(distinct_prototypes=False, packed_encoder=packed), draw)
    encoder, embedded, h_out, feed = drawn
    if packed:  # the packed encoder reads the prototypes longest first
        flat = protos.reshape(-1, protos.size(2))
        by_length = torch.argsort((flat != 0).sum(1), descending=True, stable=True)
        encoder = encoder.view(flat.size(0), flat.size(1), -1)  # drawn for (N * T) rows
        encoder = torch.empty_like(encoder).index_copy_(0, by_length, encoder)
    running = ((target[:, 1:] != 0).sum(1)[None, :] > torch.arange(target.size(1) - 1)[:, None]).sum(1)
    packed = iter(torch.cat([torch.zeros(1), running.cumsum(0)]).long().tolist())
    start = next(packed)
    replay = [encoder]
    for t, end in enumerate(packed):  # per step: the fed embedding, h_out, the feature
        for mask in (embedded, h_out, feed):
            step = torch.ones(target.size(0), mask.size(1))
            step[:end - start] = mask[start:end]
            replay.append(step)
        start = end
    replayed = iter(replay)
    reference = run(REFERENCE, lambda x, p, training=True, inplace=False:
                    x * next(replayed) if training and p else x)
    for got, want in zip(fused, reference):
        assert torch.allclose(got, want, rtol=1e-4, atol=1e-6 * float(want.abs().max()) + 1e-9)


def test_packed_lstm_directions_are_torch_lstms_over_packed_sequences():
    """Two directions in one loop, rows of different lengths, given start states: the
    states and every gradient are those of nn.LSTM over PackedSequences."""
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    torch.manual_seed(0)
    lengths, T, E, H = torch.tensor([9, 9, 7, 5, 5, 2, 1]), 9, 5, 6
    lstms = [torch.nn.LSTM(E, H, batch_first=True) for _ in range(2)]
    x = torch.randn(2, len(lengths), T, E, requires_grad=True)
    h0, c0 = torch.randn(len(lengths), H, requires_grad=True), torch.randn(len(lengths), H, requires_grad=True)
    upstream = torch.randn(2, len(lengths), T, H)
    reference = []
    for d, lstm in enumerate(lstms):
        start = None if d == 0 else (h0[None], c0[None])
        out, _ = lstm(pack_padded_sequence(x[d], lengths, batch_first=True), start)
        reference.append(pad_packed_sequence(out, batch_first=True, total_length=T)[0])
    reference = torch.stack(reference)
    leaves = [x, h0, c0, *(p for lstm in lstms for p in lstm.parameters())]
    want = torch.autograd.grad((reference * upstream).sum(), leaves)

    index, batch_sizes = packed_index(lengths, T)
    weights = [[lstm.weight_ih_l0, lstm.weight_hh_l0, lstm.bias_ih_l0, lstm.bias_hh_l0]
               for lstm in lstms]
    hs, _ = lstm_directions([x[d].reshape(-1, E)[index] for d in range(2)], batch_sizes,
                            weights, [None, (h0, c0)])
    packed_upstream = upstream.reshape(2, -1, H)[:, index]
    assert torch.allclose(hs, reference.reshape(2, -1, H)[:, index], atol=1e-6)
    got = torch.autograd.grad((hs * packed_upstream).sum(), leaves)
    for g, w in zip(got, want):
        assert torch.allclose(g, w, atol=1e-5)


@pytest.mark.parametrize("variant", ["scan", "sig"])
def test_bf16_and_fp32_training_steps_give_the_same_loss(variant):
    """A numerics check of bf16 autocast (torch emulates bf16 where the CPU lacks units):
    the training loss on a fixed batch with one fixed dropout stream."""
    if not cpu_computes_bf16():  # AVX2 only: torch has no bf16 kernel; training refuses it
        with pytest.raises(UserError, match="this CPU has no bf16 units"):
            resolve_precision("bf16")
        return
    model = scan_model().train() if variant == "scan" else sig_model(pdrop=0.1).train()
    target, protos = fixed_batch()
    protos = protos[:, :model.nproto]
    torch.manual_seed(1)
    fp32, _, _ = training_loss(model, target, protos)
    torch.manual_seed(1)
    # without bf16 units oneDNN has no bf16 LSTM: torch's own kernels then emulate bf16
    native = contextlib.nullcontext() if cpu_has_bf16() else torch.backends.mkldnn.flags(False)
    with native, torch.autocast("cpu", dtype=torch.bfloat16):
        bf16, _, _ = training_loss(model, target, protos)
    assert bf16.dtype == torch.float32  # the loss (and the weights) stay fp32
    assert fp32.item() > 1.0
    assert abs(bf16.item() / fp32.item() - 1) < 0.02
    bf16.backward()
    assert all(p.grad.dtype == torch.float32 for p in model.parameters() if p.grad is not None)


def test_precision_auto_follows_the_cpu():
    assert resolve_precision("auto") == ("bf16" if cpu_has_bf16() else "fp32")
    assert resolve_precision("fp32") == "fp32"


def test_cpu_has_bf16_reads_the_flags(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags : fpu avx2 fma amx_bf16 amx_tile\n")
    assert cpu_has_bf16(info)
    info.write_text("processor : 0\nflags : fpu avx2 fma avx512f\n")
    assert not cpu_has_bf16(info)
    assert not cpu_computes_bf16(info)  # AVX-512 foundation alone: no bf16 kernels in torch
    info.write_text("processor : 0\nflags : fpu avx2 avx512f avx512bw avx512vl avx512dq\n")
    assert cpu_computes_bf16(info) and not cpu_has_bf16(info)  # emulated


def test_precision_bf16_without_bf16_units_is_one_error_line(tmp_path):
    """Run as on a CPU without bf16 units, whatever this one has ($COMPGEN_CPUINFO)."""
    info = tmp_path / "cpuinfo"
    info.write_text("processor : 0\nflags : fpu sse4_2 avx avx2 fma avx512f\n")
    out = tmp_path / "g.pt"
    proc = subprocess.run([sys.executable, "-m", "compgen", "train", "generator", "--data",
                           "scan/jump", "-o", str(out), "--precision", "bf16"],
                          capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "COMPGEN_CPUINFO": str(info)})
    assert proc.returncode == 2
    lines = (proc.stdout + proc.stderr).strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --precision bf16")
    assert not out.exists()


def test_the_compiled_training_loops_build_here():
    """The loss tests above run the compiled loops only if they build: a failed build
    would fall back to the Python loops silently."""
    assert native.loops() is not None


def test_a_build_lock_left_by_a_killed_process_does_not_hang_the_next_run():
    """torch's ``lock`` file marks a build in progress; a build killed midway leaves it, and
    torch alone would then wait for it forever in every later process."""
    import fcntl

    native.loops()  # built, so the run below only loads
    folder = native._cache_root() / native._key()
    with open(folder.parent / f"{native._key()}.flock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # no compgen process is building meanwhile
        (folder / "lock").touch()
    code = "from compgen.models import native; print(native.loops() is not None)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False, timeout=120)
    assert done.stdout.split() == ["True"], done.stderr
    assert not (folder / "lock").exists()


def test_denormals_are_flushed_in_every_torch_thread_only_inside_the_block():
    tiny = torch.full((1 << 16,), 1e-39)  # subnormal in fp32
    assert bool((tiny * 1.0 != 0).all())
    with native.denormals_flushed(native.loops()):
        assert bool((tiny * 1.0 == 0).all())  # big enough for torch to split across threads
    assert bool((tiny * 1.0 != 0).all())
