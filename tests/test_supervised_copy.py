"""Supervised copying (``copy_sup``, the predictor's option for semantic parsing): a word
that no training output holds, seen only in a test input (a state name), is produced by
pointing at it; the same model without copying cannot produce it. And the loss is the
two-part loss of the model doc, checked against a direct computation."""

import pytest
import torch

from compgen.configs import PredictorTrainConfig
from compgen.data.vocab import COPY_ID, EOS_ID, Vocab
from compgen.models.metrics import predict
from compgen.models.seq2seq import Seq2Seq, Seq2SeqConfig, collate
from compgen.training.predictor import fit

pytestmark = pytest.mark.usefixtures("one_torch_thread")

STATES = ["texas", "ohio", "iowa", "utah", "maine", "idaho", "alaska", "hawaii", "kansas",
          "nevada", "oregon", "vermont"]
UNSEEN = "wyoming"  # in no training pair at all


def question(state, kind):
    x = {"capital": ["what", "is", "the", "capital", "of", state],
         "size": ["how", "big", "is", state]}[kind]
    y = {"capital": ["SELECT", "capital", "FROM", "state", "WHERE", "name", "=", '"', state, '"'],
         "size": ["SELECT", "area", "FROM", "state", "WHERE", "name", "=", '"', state, '"']}[kind]
    return x, y


def train_pairs():
    return [question(s, k) for s in STATES for k in ("capital", "size")]


def trained(copy_sup: bool) -> tuple[Seq2Seq, Vocab]:
    pairs = train_pairs()
    test_x, test_y = question(UNSEEN, "capital")
    vocab = Vocab.build([t for x, y in pairs + [(test_x, test_y)] for t in (x, y)])
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(vocab_size=len(vocab), hidden=48, embed=16, pdrop=0.0,
                                  copy_sup=copy_sup, max_len=20))
    tcfg = PredictorTrainConfig(batch_size=12, lr=0.01, epochs=60, patience=0)
    fit(model, vocab, pairs, [], [], tcfg, seed=0)
    return model.eval(), vocab


def test_a_word_seen_only_in_a_test_input_is_copied_to_the_output():
    test_x, test_y = question(UNSEEN, "capital")
    model, vocab = trained(copy_sup=True)
    assert predict(model, vocab, [test_x]) == [test_y]
    # the training pairs are learnt too, by copying their state names
    pairs = train_pairs()
    assert predict(model, vocab, [x for x, _ in pairs]) == [y for _, y in pairs]


def test_without_copying_the_unseen_word_is_not_produced():
    test_x, _ = question(UNSEEN, "capital")
    model, vocab = trained(copy_sup=False)
    assert UNSEEN not in predict(model, vocab, [test_x])[0]


def test_the_loss_is_the_rewritten_targets_plus_the_pointer_loss():
    pairs = train_pairs()[:4]
    vocab = Vocab.build([t for x, y in pairs for t in (x, y)])
    torch.manual_seed(1)
    model = Seq2Seq(Seq2SeqConfig(vocab_size=len(vocab), hidden=16, embed=8, pdrop=0.0,
                                  copy_sup=True, max_len=20))
    source = collate([vocab.encode(x) for x, _ in pairs], 20)
    target = collate([vocab.encode(y) for _, y in pairs], 20)
    # a direct computation, one position at a time
    memory, state = model.encode(source)
    direct, pointer = [], []
    for t in range(target.size(1) - 1):
        _, state, alpha = model.decode_step(target[:, t], state, memory)
        logp_gen = torch.log_softmax(model.output(state.feed), 1)
        for b in range(len(pairs)):
            gold = int(target[b, t + 1])
            if gold == 0:   # <pad>
                continue
            words = set(source[b, 1:].tolist()) - {EOS_ID, 0}
            direct.append(-logp_gen[b, COPY_ID if gold in words else gold])
            if gold in words or gold == EOS_ID:
                p = torch.zeros(len(vocab)).index_add_(0, source[b], alpha[b]) + 1e-7
                pointer.append(-torch.log(p[gold] / p.sum()))
    expected = torch.stack(direct).mean() + torch.stack(pointer).mean()
    assert model.loss(source, target).item() == pytest.approx(expected.item(), rel=1e-5)
    assert len(pointer) > len(pairs)  # state names and </s> are both pointed at
