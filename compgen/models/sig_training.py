"""The sig generator's teacher-forced training loss, with each weight's gradient summed
over the decoder steps in one product.

``Recombine.loss`` decodes a sig target with ``_sig_step``, the step the samplers run.
Under autograd every step then computes and accumulates its own full gradient for every
weight it reads — the LSTM's (4H, 2H) recurrent block, the (H, 3H) combine layer, the
self-attention keys — and for the (B, K, T, H) prototype memories: products only B rows
deep, then an add of the whole matrix, per step. Its self-attention memory also lives in
(B, T, H) buffers that each step rewrites whole. At H 1024, batch 64, these adds, copies
and rewrites took 45 % of an update; this loss makes the update 2.05x faster
(docs/results.md).

Here:

* the embedding columns of the LSTM's input product run for all steps at once;
* the products that read a weight every step go through ``_StepLinear``: a step's
  backward returns the input's gradient and keeps (input, output gradient); the last one
  to run returns the weight's gradient over all steps as one product. The prototype
  attention does the same for the memories (``_StepAttention``);
* the decoder states so far are a list that each step stacks, not a rewritten buffer;
* rows are sorted longest target first and each step runs the prefix of rows that still
  have a token to predict, rounded up to ROWS rows (a few product shapes, whose kernels
  oneDNN builds once).

The same loss and gradients up to float rounding (tests/test_train_speed.py). Dropout is
drawn for all steps at once: the same distribution, other draws than the reference's.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from compgen.data.vocab import PAD_ID
from compgen.models.attention import MASKED
from compgen.models.packed_lstm import explicit_dtypes, lstm_directions
from compgen.models.recombine import Memory, Recombine, is_real

ROWS = 16  # running rows are rounded up to a multiple of this


def sig_training_loss(model: Recombine, target: Tensor, protos: Tensor,
                      loops=None) -> tuple[Tensor, Tensor, Tensor]:
    """``model.loss(target, protos)`` for a sig model: (mean NLL over the target tokens,
    their summed NLL, their number). ``loops``: the compiled LSTM loops
    (:func:`compgen.models.native.loops`), else the Python loops."""
    B = target.size(0)
    order = torch.argsort(is_real(target).sum(1), descending=True, stable=True)
    target, protos = target[order], protos[order]
    memory, h, c = model._loss_memory(target, protos,
                                      lambda p: _encode_prototypes(model, p, loops))
    z = memory.z
    gold = target[:, 1:]
    valid = is_real(gold)
    lengths = valid.sum(1)  # descending

    # the LSTM input [e ; z ; feed]: the e and z columns' product for all steps at once
    cell = model.decoder
    fed = target[:, :-1]
    e = F.dropout(model.dec_embed(fed) * (fed != PAD_ID)[..., None], model.pdrop, model.training)
    ez = torch.cat([e, z[:, None].expand(-1, e.size(1), -1)], 2) if model.vae else e
    split = ez.size(2)
    gates_ez = F.linear(ez, cell.weight_ih[:, :split], cell.bias_ih + cell.bias_hh)
    gates_ez = gates_ez.transpose(0, 1).unbind(0)  # per step: its backward is one stack
    recurrent = _StepLinear(torch.cat([cell.weight_ih[:, split:], cell.weight_hh], 1))
    combine = _StepLinear(model.combine.weight, model.combine.bias)
    key = model.self_attention.key
    self_key = _StepLinear(key.weight[0], key.bias[0])
    attention = _StepAttention(memory.keys, memory.values, memory.mask) if model.nproto else None

    feed = torch.zeros(B, model.feed_dim, device=target.device)
    past_h: list[Tensor] = []
    past_key: list[Tensor] = []
    nll = torch.zeros((), device=target.device)
    for t in range(int(lengths[0]) if B else 0):
        n = min(B, -(-int((lengths > t).sum()) // ROWS) * ROWS)
        if n < h.size(0):  # rows leave in a few groups: cut the kept states once per group
            h, c, feed = h[:n], c[:n], feed[:n]
            past_h, past_key = [x[:n] for x in past_h], [x[:n] for x in past_key]
        past_h.append(h)  # slot t: the state entering step t, paired with the token fed
        past_key.append(self_key(h))
        gates = gates_ez[t][:n] + recurrent(torch.cat([feed, h], 1))
        h, c = _lstm_pointwise(gates.float(), c)

        slots_h, slots_key = torch.stack(past_h, 1), torch.stack(past_key, 1)
        # slot 0 (h_0, <s>) is masked: at t = 0 it is the only slot and takes all weight
        scores = torch.einsum("bh,blh->bl", h, slots_key)
        scores = scores.masked_fill(torch.arange(t + 1, device=h.device) == 0, MASKED)
        self_alpha = torch.softmax(scores, dim=1)
        self_context = torch.einsum("bl,blh->bh", self_alpha, slots_h)
        if attention is not None:
            context, alpha = attention(h)
            feats = torch.cat([h, context.flatten(1), self_context], 1)
        else:
            alpha = memory.keys.new_zeros(n, 0, 0)
            feats = torch.cat([h, self_context], 1)
        f = F.dropout(combine(feats), model.outdrop, model.training)
        rows = Memory(*(part[:n] for part in memory))
        logp = model._sig_distribution(f, h, alpha, self_alpha, target[:n, : t + 1], rows)
        if model.feed_dim > 0:
            feed = f
        nll = nll - (logp.gather(1, gold[:n, t, None])[:, 0] * valid[:n, t]).sum()
    ntok = valid.sum()
    return nll / ntok.clamp(min=1), nll.detach(), ntok


def _encode_prototypes(model: Recombine, protos: Tensor,
                       loops) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``model._encode_prototypes``: the BiLSTM over every padded position (the reference's
    unpacked encoder: pad embeddings are zeros, the backward direction starts at the
    padding) as both directions of one ``lstm_directions`` call."""
    B, K, T = protos.shape
    N, lstm = B * K, model.proto_encoder
    flat = protos.reshape(N, T)
    emb = model.enc_embed(flat) * is_real(flat)[..., None]
    emb = F.dropout(emb, model.pdrop, model.training).transpose(0, 1)  # (T, N, E), step-major
    forward, backward = ([getattr(lstm, f"{name}_l0{suffix}")
                          for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
                         for suffix in ("", "_reverse"))
    (h_f, h_b), (c_f, c_b) = lstm_directions(
        [emb.reshape(T * N, -1), emb.flip(0).reshape(T * N, -1)], [N] * T,
        [forward, backward], native=loops)
    h_f, h_b = h_f.view(T, N, -1), h_b.view(T, N, -1).flip(0)  # by position
    out = model.project(torch.cat([h_f, h_b], 2).transpose(0, 1))  # (N, T, H)
    h_fin = (h_f[-1] + h_b[0]).view(B, K, -1)
    c_fin = (c_f.view(T, N, -1)[-1] + c_b.view(T, N, -1)[-1]).view(B, K, -1)
    h0, c0 = model._initial_hc(h_fin, c_fin)
    return out.view(B, K, T, -1), h_fin, h0, c0


def _lstm_pointwise(gates: Tensor, c: Tensor) -> tuple[Tensor, Tensor]:
    """LSTM state update from the gate pre-activations ``(B, 4H)`` (i, f, g, o)."""
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c), c


def _compute_dtype() -> torch.dtype:
    return torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32


class _Steps:
    """What the steps' backward passes keep for the one product at the end. The last
    backward to run (``calls`` of them) computes it: every step reaches the loss, so
    each step's backward runs exactly once."""

    def __init__(self):
        self.calls, self.kept = 0, []

    def keep(self, *tensors: Tensor) -> bool:
        """Keep one step's tensors; True when this was the last step to come back.
        Detached: in fp32 the saved input is the step's own input, whose graph holds the
        nodes that hold this object, a cycle through autograd's C++ nodes that Python's
        collector cannot free (under bf16 autocast it is a cast copy, without a graph)."""
        self.kept.append(tuple(t.detach() for t in tensors))
        return len(self.kept) == self.calls

    def release(self) -> None:
        """Drop what the steps kept, once the one product has used it."""
        self.kept = []

    def stacked(self, i: int, rows: int) -> Tensor:
        """Part ``i`` of every step, zero rows appended up to ``rows``, stacked ``(S, rows, ...)``."""
        return torch.stack([F.pad(k[i], (0, 0) * (k[i].dim() - 1) + (0, rows - k[i].size(0)))
                            for k in self.kept])


class _StepLinear(_Steps):
    """``F.linear(x, weight, bias)`` at every step, the weight's gradient in one product.
    Under autocast the weight is cast once, not at every step."""

    def __init__(self, weight: Tensor, bias: Tensor | None = None):
        super().__init__()
        dtype = _compute_dtype()
        self.weight = weight.to(dtype)
        self.bias = bias.to(dtype) if bias is not None else None

    def __call__(self, x: Tensor) -> Tensor:
        self.calls += 1
        return _LinearStep.apply(x, self.weight, self.bias, self)


class _LinearStep(torch.autograd.Function):
    @staticmethod
    @explicit_dtypes
    def forward(ctx, x, weight, bias, steps):
        ctx.steps, ctx.x_dtype = steps, x.dtype
        x = x.to(weight.dtype)
        ctx.save_for_backward(x)
        return F.linear(x, weight, bias)

    @staticmethod
    @explicit_dtypes
    def backward(ctx, grad):
        steps, (x,) = ctx.steps, ctx.saved_tensors
        grad = grad.to(steps.weight.dtype)
        dx = (grad @ steps.weight).to(ctx.x_dtype)
        if not steps.keep(x, grad):
            return dx, None, None, None
        xs = torch.cat([k[0] for k in steps.kept])
        grads = torch.cat([k[1] for k in steps.kept])
        steps.release()
        dbias = grads.sum(0) if steps.bias is not None else None
        return dx, grads.t() @ xs, dbias, None


class _StepAttention(_Steps):
    """The prototype attention (``DotAttention``) at every step: context ``(n, K, A)``
    and weights ``(n, K, T)`` for the first n rows' queries; the memories' gradients
    over all steps in one batched product."""

    def __init__(self, keys: Tensor, values: Tensor, mask: Tensor):
        super().__init__()
        self.keys, self.values, self.mask = keys, values, mask

    def __call__(self, query: Tensor) -> tuple[Tensor, Tensor]:
        self.calls += 1
        return _AttentionStep.apply(query, self.keys, self.values, self)


class _AttentionStep(torch.autograd.Function):
    @staticmethod
    @explicit_dtypes
    def forward(ctx, query, keys, values, steps):
        n = query.size(0)
        keys, values = keys[:n], values[:n]
        q = query.to(keys.dtype)
        scores = torch.einsum("bh,bkth->bkt", q, keys).float()
        alpha = torch.softmax(scores.masked_fill(~steps.mask[:n], MASKED), dim=-1)
        ctx.steps, ctx.q_dtype = steps, query.dtype
        ctx.save_for_backward(q, alpha)
        return torch.einsum("bkt,bkth->bkh", alpha.to(values.dtype), values), alpha

    @staticmethod
    @explicit_dtypes
    def backward(ctx, d_context, d_alpha):
        steps, (q, alpha) = ctx.steps, ctx.saved_tensors
        n, B = q.size(0), steps.keys.size(0)
        keys, values = steps.keys[:n], steps.values[:n]
        d_context = d_context.to(values.dtype)
        d_alpha = torch.einsum("bkh,bkth->bkt", d_context, values).float() + d_alpha
        d_scores = alpha * (d_alpha - (d_alpha * alpha).sum(-1, keepdim=True))
        d_query = torch.einsum("bkt,bkth->bh", d_scores.to(keys.dtype), keys).to(ctx.q_dtype)
        if not steps.keep(q, d_scores.to(keys.dtype), alpha.to(values.dtype), d_context):
            return d_query, None, None, None
        qs, d_scores_s, alphas, d_contexts = (steps.stacked(i, B) for i in range(4))
        steps.release()
        d_keys = torch.einsum("sbkt,sbh->bkth", d_scores_s, qs)
        d_values = torch.einsum("sbkt,sbkh->bkth", alphas, d_contexts)
        return d_query, d_keys, d_values, None
