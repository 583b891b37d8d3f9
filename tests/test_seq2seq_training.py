"""The predictor's packed training loss against the reference computation (Seq2Seq.loss):
the same loss and gradients without dropout, dropout in the same places, on real SCAN
pairs of many lengths (a target cut at max_len and one with an unknown token included)."""

import pytest
import torch
import torch.nn.functional as F

from compgen.data import load_dataset
from compgen.data.vocab import Vocab
from compgen.models.seq2seq import Seq2Seq, Seq2SeqConfig, collate
from compgen.models.seq2seq_training import packed_loss
from compgen.training.predictor import conditional_pairs

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def batch(data_dir):
    pairs = conditional_pairs(load_dataset("scan/around_right", data_dir))[:2000:80]
    vocab = Vocab.build([t for x, y in pairs for t in (x, y)])
    sources = [vocab.encode(x) for x, _ in pairs]
    targets = [vocab.encode(y) for _, y in pairs]
    targets[3] = targets[3][:2] + [vocab.encode(["<never seen>"])[0]] + targets[3][2:]
    max_len = max(len(t) for t in targets) - 2  # the longest targets are cut
    assert len({len(t) for t in targets}) > 5
    return len(vocab), collate(sources, max_len), collate(targets, max_len), max_len


def model(vocab_size, max_len, copy, pdrop=0.0):
    """``copy``: False, True (R&R's copying) or "sup" (supervised copying)."""
    torch.manual_seed(3)
    cfg = Seq2SeqConfig(vocab_size=vocab_size, hidden=24, embed=8, pdrop=pdrop,
                        copy=copy is True, copy_sup=copy == "sup", max_len=max_len)
    return Seq2Seq(cfg)


def loss_and_gradients(m, loss):
    return loss.item(), list(torch.autograd.grad(loss, list(m.parameters())))


@pytest.mark.parametrize("copy", [False, True, "sup"])
def test_packed_loss_and_gradients_are_the_reference_ones(batch, copy):
    vocab_size, source, target, max_len = batch
    m = model(vocab_size, max_len, copy).train()  # pdrop 0: training mode draws nothing
    reference, reference_grads = loss_and_gradients(m, m.loss(source, target))
    packed, packed_grads = loss_and_gradients(m, packed_loss(m, source, target))
    assert packed == pytest.approx(reference, rel=1e-6)
    for (name, _), a, b in zip(m.named_parameters(), reference_grads, packed_grads):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-7), name


@pytest.mark.parametrize("copy", [False, True])
def test_packed_loss_drops_out_where_the_reference_does(batch, copy, monkeypatch):
    """Dropout made deterministic (a fixed scale, large so it shows) so the two
    computations can be compared: a missing or misplaced dropout changes the loss."""
    vocab_size, source, target, max_len = batch

    def scaled(x, p=0.5, training=True, inplace=False):
        return x * (1 + 10 * p) if training else x

    monkeypatch.setattr(F, "dropout", scaled)
    m = model(vocab_size, max_len, copy, pdrop=0.3).train()
    reference, reference_grads = loss_and_gradients(m, m.loss(source, target))
    packed, packed_grads = loss_and_gradients(m, packed_loss(m, source, target))
    assert packed == pytest.approx(reference, rel=1e-6)
    for a, b in zip(reference_grads, packed_grads):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-7)
    assert float(m.eval().loss(source, target)) != pytest.approx(reference, rel=1e-2)
