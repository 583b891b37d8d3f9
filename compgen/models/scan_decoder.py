"""The scan generator's teacher-forced decoder loop as ONE autograd function, for training.

The reference loop (``Recombine._scan_recurrence`` step after step) records ~350 autograd
operations per step, and each step's backward computes and accumulates its own gradient
for every weight matrix and for the attention memories (full ``(4H, E + H)`` or ``(B, K,
T, A)`` tensors per step). Here the forward pass runs the steps without autograd, keeping
what the backward pass needs in step-major packed buffers (one row per running row and
step, as in a PackedSequence), and the hand-written backward pass walks the steps back,
then computes every weight's and memory's gradient in ONE product over all steps.

The computation is the reference's (spec §3.2):

    gates = W_ih [e ; z ; feed_{t-1}] + W_hh h_{t-1} + b      -> h_t, c_t (LSTM)
    q_k   = tanh(Wq_k [h_t ; e ; z ; feed_{t-1}] + bq_k)
    s_k   = (keys_k q_k + R_k[offset] q_k) / sqrt(A), masked   (the copy scores)
    ctx_k = softmax(s_k) (values_k + Rv_k[offset])
    y_t   = W_out [dropout(h_t) ; ctx_1 ; ...] + b_out,   feed_t = dropout(y_t)

The parts that do not depend on the recurrence (the ``e``/``z`` columns of the gate and
query layers, and the dropout masks) are computed for all steps at once, outside.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from compgen.models.attention import MASKED, relative_positions
from compgen.models.native import loop_for
from compgen.models.packed_lstm import (
    explicit_dtypes,
    gate_activations,
    rows_gradient,
    rows_linear,
    tanh,
)


def fused_decoder(model, e: Tensor, z: Tensor, row: Tensor, keys: Tensor, values: Tensor,
                  mask: Tensor, batch_sizes: list[int], native=None) -> tuple[Tensor, Tensor]:
    """The scan decoder over packed steps (rows sorted by length, longest first): ``e``
    ``(P, E)`` the (dropped-out) embeddings of the fed tokens, ``row`` ``(P,)`` the batch
    row of each packed position, ``z`` ``(B, 2Z)``, memories ``(B, K, T, A)``, ``mask``
    ``(B, K, T)``. Returns the output features ``(P, E)`` and copy scores ``(P, K, T)``.
    ``native``: the compiled loops (:func:`compgen.models.native.loops`) to run the steps
    with, else the Python loops."""
    cell, att, out = model.decoder, model.attention, model.out
    H, K, A = model.hidden, keys.size(1), keys.size(3)
    ez = torch.cat([e, z[row]], 1)  # the decoder input without the fed-back feature
    split = ez.size(1)
    w_ih = cell.weight_ih
    gates_ez = rows_linear(ez, w_ih[:, :split], cell.bias_ih + cell.bias_hh)
    w_feed_h = torch.cat([w_ih[:, split:], cell.weight_hh], 1)  # reads [feed ; h]
    w_q = att.query.weight.reshape(K * A, -1)  # the K query layers read the same vector
    query_ez = rows_linear(ez, w_q[:, H:H + split], att.query.bias.reshape(-1))
    w_q_h_feed = torch.cat([w_q[:, :H], w_q[:, H + split:]], 1)  # reads [h ; feed]
    steps, T = len(batch_sizes), keys.size(2)
    offsets = relative_positions(torch.arange(steps), T, att.kpos)  # (steps, T)
    P = e.size(0)
    h_drop = dropout_mask(P, H, model.outdrop, model.training or model.outdrop_test)
    feed_drop = dropout_mask(P, out.weight.size(0), model.pdrop, model.training)
    gemm = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32
    return _FusedDecoder.apply(gates_ez, query_ez, w_feed_h, w_q_h_feed, out.weight, out.bias,
                               keys, values, att.pos_key, att.pos_value, mask, offsets,
                               h_drop, feed_drop, batch_sizes, gemm, native)


def dropout_mask(rows: int, width: int, p: float, active: bool) -> Tensor | None:
    """F.dropout's mask (Bernoulli(1 - p) / (1 - p)) for every packed position at once,
    drawn as uniform >= p (4x faster than ``bernoulli_``, which F.dropout uses, here)."""
    if not active or p == 0:
        return None
    return torch.rand(rows, width).ge_(p).div_(1 - p)


def dropout(x: Tensor, p: float, active: bool) -> Tensor:
    """F.dropout of the rows ``x`` ``(n, width)`` with :func:`dropout_mask`."""
    mask = dropout_mask(x.size(0), x.size(1), p, active)
    return x if mask is None else x * mask


class _FusedDecoder(torch.autograd.Function):
    """Forward: the steps without autograd. The products with the weights run in ``gemm``
    (bf16 under autocast: their inputs are kept in bf16 buffers, written once); the
    nonlinearities, the attention's reads of the memories and the softmax in fp32."""

    @staticmethod
    @explicit_dtypes
    def forward(ctx, gates_ez, query_ez, w_feed_h, w_q_h_feed, w_out, b_out, keys, values,
                pos_key, pos_value, mask, offsets, h_drop, feed_drop, batch_sizes, gemm, native):
        B, K, T, A = keys.shape
        H = gates_ez.size(1) // 4
        Fd = w_feed_h.size(1) - H  # width of the fed-back feature
        P = gates_ez.size(0)
        b_out = b_out.detach().float()
        # the memories in the layouts every product reads in place, the scale 1/sqrt(A)
        # folded into the keys: scores (1, A) x (A, T), contexts (1, T) x (T, A)
        scale = 1 / math.sqrt(A)
        keys_t = (keys.detach().float() * scale).transpose(-1, -2).contiguous()  # (B, K, A, T)
        values = values.detach().float().contiguous()
        # the relative-position vectors of every memory position at every step
        pos_keys = (pos_key.detach().float() * scale)[:, offsets].permute(1, 0, 3, 2).contiguous()
        pos_values = pos_value.detach().float()[:, offsets].transpose(0, 1).contiguous()
        E = w_out.size(0)
        ctx.batch_sizes, ctx.dims, ctx.native = batch_sizes, (B, K, T, A, H, Fd, E), native
        mask = mask.contiguous()
        if native is not None:
            weights = [w.detach().to(gemm).contiguous() for w in (w_feed_h, w_q_h_feed, w_out)]
            ys, scores, *buffers = loop_for(native, "decoder_forward", gemm)(
                gates_ez.detach().to(gemm).contiguous(), query_ez.detach().to(gemm).contiguous(),
                *weights, b_out, keys_t, values, pos_keys, pos_values, mask, h_drop, feed_drop,
                batch_sizes)
            ctx.save_for_backward(*buffers, mask, h_drop, feed_drop)
            ctx.memories = (*weights, keys_t, values, pos_keys, pos_values, offsets, pos_key.size(1))
            return ys, scores
        gates_ez, query_ez = gates_ez.detach().float(), query_ez.detach().float()
        w_fh, w_qhf, w_o = (w.detach().t().to(gemm) for w in (w_feed_h, w_q_h_feed, w_out))
        unmasked = ~mask
        # what the backward pass reads, one row per packed position
        x_fh = gates_ez.new_empty(P, Fd + H, dtype=gemm)   # [feed_{t-1} ; h_{t-1}]
        acts = torch.empty_like(gates_ez)                   # i, f, g, o
        cs, tanh_cs = gates_ez.new_empty(P, H), gates_ez.new_empty(P, H)
        x_q = gates_ez.new_empty(P, H + Fd, dtype=gemm)    # [h_t ; feed_{t-1}]
        qs = gates_ez.new_empty(P, K, A)
        alphas = gates_ez.new_empty(P, K, T)
        x_out = gates_ez.new_empty(P, H + K * A, dtype=gemm)  # [dropout(h_t) ; contexts]
        ys = gates_ez.new_empty(P, w_out.size(0))
        scores = gates_ez.new_empty(P, K, T)
        x_fh[:batch_sizes[0] if batch_sizes else 0].zero_()  # feed_0 = h_0 = 0
        c = gates_ez.new_zeros(B, H)
        start = 0
        for t, n in enumerate(batch_sizes):
            rows = slice(start, start + n)
            start += n
            gates = gates_ez[rows] + torch.mm(x_fh[rows], w_fh)
            i, f, g, o = gate_activations(gates, acts[rows], H).chunk(4, 1)
            c = torch.addcmul(f * c[:n], i, g, out=cs[rows])
            h = torch.mul(o, tanh(c, out=tanh_cs[rows]), out=x_q[rows, :H])
            x_q[rows, H:] = x_fh[rows, :Fd]
            q = tanh(query_ez[rows] + torch.mm(x_q[rows], w_qhf), out=qs[rows].view(n, K * A))
            q = q.view(n, K, A)
            s = torch.matmul(q.unsqueeze(2), keys_t[:n]).squeeze(2)
            s += torch.matmul(q.transpose(0, 1), pos_keys[t]).transpose(0, 1)
            s = scores[rows].copy_(s).masked_fill_(unmasked[:n], MASKED)
            alpha = alphas[rows].copy_(torch.softmax(s, -1))
            context = torch.matmul(alpha.unsqueeze(2), values[:n]).squeeze(2)
            context += torch.matmul(alpha.transpose(0, 1), pos_values[t]).transpose(0, 1)
            if h_drop is None:
                x_out[rows, :H] = h
            else:
                torch.mul(h, h_drop[rows], out=x_out[rows, :H])
            x_out[rows, H:] = context.view(n, K * A)
            y = torch.add(torch.mm(x_out[rows], w_o), b_out, out=ys[rows])
            if start < P:  # the next step reads [feed_t ; h_t] of the rows still running
                following = slice(start, start + batch_sizes[t + 1])
                m = batch_sizes[t + 1]
                if feed_drop is None:
                    x_fh[following, :Fd] = y[:m]
                else:
                    torch.mul(y[:m], feed_drop[rows][:m], out=x_fh[following, :Fd])
                x_fh[following, Fd:] = h[:m]
        ctx.save_for_backward(x_fh, acts, cs, tanh_cs, x_q, qs, alphas, x_out, mask, h_drop, feed_drop)
        ctx.memories = (w_fh, w_qhf, w_o, keys_t, values, pos_keys, pos_values, offsets,
                        pos_key.size(1))
        return ys, scores

    @staticmethod
    @explicit_dtypes
    def backward(ctx, d_ys, d_scores):
        x_fh, acts, cs, tanh_cs, x_q, qs, alphas, x_out, mask, h_drop, feed_drop = ctx.saved_tensors
        *weights, keys_t, values, pos_keys, pos_values, offsets, npos = ctx.memories
        batch_sizes, (B, K, T, A, _, _, E) = ctx.batch_sizes, ctx.dims
        P = x_fh.size(0)
        scale = 1 / math.sqrt(A)
        d_ys = x_out.new_zeros(P, E, dtype=torch.float32) if d_ys is None else d_ys.float()
        d_scores = alphas.new_zeros(P, K, T) if d_scores is None else d_scores.float()
        steps = (_backward_steps if ctx.native is None
                 else loop_for(ctx.native, "decoder_backward", weights[0].dtype))
        d_gates, d_query, d_y, d_context, d_s = steps(
            d_ys.contiguous(), d_scores.contiguous(), x_fh, acts, cs, tanh_cs, qs, alphas, *weights,
            keys_t, values, pos_keys, pos_values, mask, h_drop, feed_drop, batch_sizes)
        # every weight's gradient in one product over all steps
        d_w_feed_h = rows_gradient(d_gates, x_fh).float()
        d_w_q = rows_gradient(d_query, x_q).float()
        d_w_out = rows_gradient(d_y, x_out).float()
        d_b_out = d_y.float().sum(0)
        # memories: per (row, prototype), a sum over the steps -> padded (B, K, steps, .)
        where = _padded_index(batch_sizes)
        steps = len(batch_sizes)
        d_keys = torch.matmul(_padded(d_s, where, B, steps).transpose(-1, -2),
                              _padded(qs, where, B, steps)) * scale
        d_values = torch.matmul(_padded(alphas, where, B, steps).transpose(-1, -2),
                                _padded(d_context, where, B, steps))
        # relative positions: the mass on each offset, from every memory position
        step = torch.repeat_interleave(torch.arange(steps), torch.tensor(batch_sizes))
        offset = offsets[step][:, None, :].expand(-1, K, -1)  # (P, K, T)
        by_offset = alphas.new_zeros(2, P, K, npos)
        by_offset[0].scatter_add_(2, offset, d_s)
        by_offset[1].scatter_add_(2, offset, alphas)
        d_pos_key = torch.einsum("pkq,pka->kqa", by_offset[0], qs) * scale
        d_pos_value = torch.einsum("pkq,pka->kqa", by_offset[1], d_context)
        return (d_gates, d_query, d_w_feed_h, d_w_q, d_w_out, d_b_out, d_keys, d_values,
                d_pos_key, d_pos_value) + (None,) * 7


def _backward_steps(d_ys, d_scores, x_fh, acts, cs, tanh_cs, qs, alphas, w_fh, w_qhf, w_o,
                    keys_t, values, pos_keys, pos_values, mask, h_drop, feed_drop, batch_sizes):
    """The backward loop of ``_FusedDecoder`` in Python (``decoder_backward`` in
    C++): the gradients of the gates, queries and outputs before their products (in the
    products' dtype), of the contexts and of the scores before masking and scaling."""
    P, gemm = x_fh.size(0), x_fh.dtype
    B, K, A, _ = keys_t.shape
    H, E = tanh_cs.size(1), w_o.size(1)
    Fd = w_fh.size(0) - H
    d_gates = acts.new_empty(P, 4 * H, dtype=gemm)
    d_query = acts.new_empty(P, K * A, dtype=gemm)
    d_y = acts.new_empty(P, E, dtype=gemm)
    d_context = alphas.new_empty(P, K, A)
    d_s = torch.empty_like(alphas)
    keep = mask.float()
    # gradients w.r.t. the state entering each step, from the steps after it
    d_h, d_c = acts.new_zeros(B, H), acts.new_zeros(B, H)
    d_feed = acts.new_zeros(B, Fd)
    w_fh_t, w_qhf_t, w_o_t = w_fh.t(), w_qhf.t(), w_o.t()
    ends = torch.tensor([0] + batch_sizes).cumsum(0).tolist()
    for t in range(len(batch_sizes) - 1, -1, -1):
        n, rows = batch_sizes[t], slice(ends[t], ends[t + 1])
        dy = d_ys[rows] + (d_feed[:n] if feed_drop is None else d_feed[:n] * feed_drop[rows])
        d_y[rows] = dy
        dx_out = torch.mm(d_y[rows], w_o_t).float()  # (n, H + K*A)
        dctx = d_context[rows].view(n, K * A).copy_(dx_out[:, H:]).view(n, K, A)
        alpha = alphas[rows]
        d_alpha = torch.matmul(dctx.unsqueeze(2), values[:n].transpose(-1, -2)).squeeze(2)
        d_alpha += torch.matmul(dctx.transpose(0, 1), pos_values[t].transpose(-1, -2)).transpose(0, 1)
        ds = alpha * (d_alpha - (d_alpha * alpha).sum(-1, keepdim=True)) + d_scores[rows]
        ds = torch.mul(ds, keep[:n], out=d_s[rows])  # masked scores get none
        dq = torch.matmul(ds.unsqueeze(2), keys_t[:n].transpose(-1, -2)).squeeze(2)
        dq += torch.matmul(ds.transpose(0, 1), pos_keys[t].transpose(-1, -2)).transpose(0, 1)
        q = qs[rows].view(n, K * A)
        torch.mul(dq.view(n, K * A), 1 - q * q, out=d_query[rows])
        dx_q = torch.mm(d_query[rows], w_qhf_t).float()  # (n, H + F): [h_t ; feed_{t-1}]
        dh_out = dx_out[:, :H] if h_drop is None else dx_out[:, :H] * h_drop[rows]
        dh = d_h[:n] + dx_q[:, :H] + dh_out
        i, f, g, o = acts[rows].chunk(4, 1)
        tanh_c = tanh_cs[rows]
        c_prev = cs[ends[t - 1]:ends[t - 1] + n] if t > 0 else torch.zeros_like(tanh_c)
        dc = d_c[:n] + dh * o * (1 - tanh_c * tanh_c)
        dg = d_gates[rows]
        dgi, dgf, dgg, dgo = dg.chunk(4, 1)
        torch.mul(dc * g, i * (1 - i), out=dgi)
        torch.mul(dc * c_prev, f * (1 - f), out=dgf)
        torch.mul(dc * i, 1 - g * g, out=dgg)
        torch.mul(dh * tanh_c, o * (1 - o), out=dgo)
        dx_fh = torch.mm(dg, w_fh_t).float()  # (n, F + H): [feed_{t-1} ; h_{t-1}]
        d_h[:n] = dx_fh[:, Fd:]
        d_c[:n] = dc * f
        d_feed[:n] = dx_fh[:, :Fd] + dx_q[:, H:]
    return d_gates, d_query, d_y, d_context, d_s


def _padded_index(batch_sizes: list[int]) -> Tensor:
    """For each packed position, its index in a (rows, steps) grid: row * steps + step."""
    steps = len(batch_sizes)
    step = torch.repeat_interleave(torch.arange(steps), torch.tensor(batch_sizes))
    row = torch.cat([torch.arange(n) for n in batch_sizes])
    return row * steps + step


def _padded(packed: Tensor, where: Tensor, rows: int, steps: int) -> Tensor:
    """Packed ``(P, K, D)`` -> ``(rows, K, steps, D)``, zeros where a row had ended."""
    K, D = packed.shape[1:]
    grid = packed.new_zeros(rows * steps, K, D).index_copy_(0, where, packed)
    return grid.view(rows, steps, K, D).transpose(1, 2)
