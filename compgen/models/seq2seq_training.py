"""The predictor's teacher-forced training loss without the decoder's padding work.

``Seq2Seq.loss`` is the reference computation: every decoder step runs all B rows of
the batch up to its longest target. SCAN targets vary from 1 to 48 tokens, so in a
random batch of 64 about 63 % of the decoder's row-steps are padding (rows whose target
has ended, their loss weight 0). ``packed_loss`` computes the same loss with

* packed steps: rows sorted by target length (longest first), step t runs only the
  rows whose target has a token to predict at t, a prefix of the batch;
* the parts that do not depend on the recurrence taken out of the step loop: the
  embedding columns of the decoder's input layer for all steps in one product, and
  the output layer (and the copy mixture) over all packed positions in one product;
* one weight-gradient product per layer of the loop (``StepWeightGradient``) instead of
  a full gradient per step.

Without dropout the loss and its gradients are ``Seq2Seq.loss``'s up to float rounding
(tests/test_seq2seq_training.py checks them). The dropout masks are drawn in another
order (the embedding part of the decoder input for all steps at once), so one seed
gives another, equally distributed, run.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from compgen.data.vocab import PAD_ID
from compgen.models.seq2seq import Seq2Seq, is_real, source_words, supervised_copy_loss


def packed_loss(model: Seq2Seq, source: Tensor, target: Tensor) -> Tensor:
    """``model.loss(source, target)`` over packed decoder steps (see the module doc)."""
    gold = target[:, 1:]
    lengths = (gold != PAD_ID).sum(1)  # padding only trails
    order = torch.argsort(lengths, descending=True, stable=True)
    source, target, gold, lengths = source[order], target[order], gold[order], lengths[order]
    memory, state = model.encode(source)
    steps = int(lengths[0])  # >= 1: every target has a token or </s>
    running = (lengths[None, :] > torch.arange(steps)[:, None]).sum(1).tolist()  # rows per step

    # packed position k = (step t, row r), step-major: step t holds rows 0 .. running[t] - 1
    counts = torch.tensor(running, dtype=torch.long)
    step = torch.repeat_interleave(torch.arange(steps), counts)
    row = torch.arange(step.size(0)) - torch.repeat_interleave(counts.cumsum(0) - counts, counts)
    E, cell, p, training = model.cfg.embed, model.decoder, model.pdrop, model.training
    # decode_step drops out [embedding ; feed] as one vector: the two parts independently.
    # The input layer's embedding columns for every packed position in one product, split
    # per step (a split's backward is one concatenation; slicing a (B, S, 4H) tensor per
    # step would allocate and fill it in every step's backward)
    embedded = F.dropout(model.dec_embed(target[row, step]), p, training)
    w_recurrent = torch.cat([cell.weight_ih[:, E:], cell.weight_hh], 1)      # reads [feed ; h]
    recurrent_inputs, combine_inputs = [], []
    gates_in = (F.linear(embedded, cell.weight_ih[:, :E], cell.bias_ih + cell.bias_hh)
                + StepWeightGradient.apply(w_recurrent, step.size(0), recurrent_inputs)).split(running)
    combine_in = (model.combine.bias.expand(step.size(0), -1)
                  + StepWeightGradient.apply(model.combine.weight, step.size(0), combine_inputs)).split(running)
    w_recurrent, w_combine = w_recurrent.detach(), model.combine.weight.detach()
    h, c, feed = state
    features, alphas = [], []
    for t, n in enumerate(running):
        h, c, feed = h[:n], c[:n], feed[:n]
        x = torch.cat([F.dropout(feed, p, training), h], 1)
        recurrent_inputs.append(x.detach())
        gates = torch.addmm(gates_in[t], x, w_recurrent.t())
        i, f, g, o = gates.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        scores = torch.bmm(memory.keys[:n], h[:, :, None]).squeeze(2)
        alpha = torch.softmax(scores.masked_fill(~memory.mask[:n], -1e18), dim=1)
        attended = torch.bmm(alpha[:, None, :], memory.context[:n]).squeeze(1)
        x = torch.cat([h, attended], 1)
        combine_inputs.append(x.detach())
        feed = F.dropout(torch.addmm(combine_in[t], x, w_combine.t()), p, training)
        features.append(feed)
        alphas.append(alpha)

    logits = model.output(torch.cat(features))
    if model.copy_sup:
        return supervised_copy_loss(logits, torch.cat(alphas), memory.source_onehot[row],
                                    source_words(source, model.vocab_size)[row], gold[row, step])
    if model.copy:
        p_gen = torch.softmax(logits, dim=1)
        gate = p_gen[:, model.copy_id: model.copy_id + 1]
        p_copy = torch.bmm(torch.cat(alphas)[:, None, :], memory.source_onehot[row]).squeeze(1) + 1e-7
        logp = torch.log_softmax(torch.log(p_gen + gate * p_copy), dim=1)
    else:
        logp = torch.log_softmax(logits, dim=1)
    tokens = gold[row, step]
    nll = -logp.gather(1, tokens[:, None]).squeeze(1)
    weight = is_real(tokens).to(nll.dtype)
    return (nll * weight).sum() / is_real(gold).sum().clamp(min=1).to(nll.dtype)


class StepWeightGradient(torch.autograd.Function):
    """Zeros ``(P, out)`` added to the packed outputs of a layer ``y_t = x_t W^T`` that the
    step loop computes with W *detached*: the gradient reaching these zeros is every
    step's output gradient, and the backward pass turns it into W's gradient in ONE
    product with the loop's inputs (``inputs``, filled by the loop before backward runs).
    Autograd would instead compute and accumulate a full ``(out, in)`` gradient per step:
    at H 512 that is most of the training step's time."""

    @staticmethod
    def forward(ctx, weight: Tensor, rows: int, inputs: list[Tensor]) -> Tensor:
        ctx.inputs = inputs
        return weight.new_zeros(rows, weight.size(0))

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad.t().mm(torch.cat(ctx.inputs)), None, None
