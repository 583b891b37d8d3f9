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
import torch.nn.functional as F
from torch import Tensor

from compgen.models.attention import MASKED, relative_positions


def fused_decoder(model, e: Tensor, z: Tensor, row: Tensor, keys: Tensor, values: Tensor,
                  mask: Tensor, batch_sizes: list[int]) -> tuple[Tensor, Tensor]:
    """The scan decoder over packed steps (rows sorted by length, longest first): ``e``
    ``(P, E)`` the (dropped-out) embeddings of the fed tokens, ``row`` ``(P,)`` the batch
    row of each packed position, ``z`` ``(B, 2Z)``, memories ``(B, K, T, A)``, ``mask``
    ``(B, K, T)``. Returns the output features ``(P, E)`` and copy scores ``(P, K, T)``."""
    cell, att, out = model.decoder, model.attention, model.out
    H, K, A = model.hidden, keys.size(1), keys.size(3)
    ez = torch.cat([e, z[row]], 1)  # the decoder input without the fed-back feature
    split = ez.size(1)
    w_ih = cell.weight_ih
    gates_ez = F.linear(ez, w_ih[:, :split], cell.bias_ih + cell.bias_hh)
    w_feed_h = torch.cat([w_ih[:, split:], cell.weight_hh], 1)  # reads [feed ; h]
    w_q = att.query.weight.reshape(K * A, -1)  # the K query layers read the same vector
    query_ez = F.linear(ez, w_q[:, H:H + split], att.query.bias.reshape(-1))
    w_q_h_feed = torch.cat([w_q[:, :H], w_q[:, H + split:]], 1)  # reads [h ; feed]
    steps, T = len(batch_sizes), keys.size(2)
    offsets = relative_positions(torch.arange(steps), T, att.kpos)  # (steps, T)
    one_hot = F.one_hot(offsets, 2 * att.kpos + 1).float()  # position -> offset, per step
    P = e.size(0)
    h_drop = _dropout_mask(P, H, model.outdrop, model.training or model.outdrop_test)
    feed_drop = _dropout_mask(P, out.weight.size(0), model.pdrop, model.training)
    gemm = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32
    return _FusedDecoder.apply(gates_ez, query_ez, w_feed_h, w_q_h_feed, out.weight, out.bias,
                               keys, values, att.pos_key, att.pos_value, mask, one_hot,
                               h_drop, feed_drop, batch_sizes, gemm)


def _dropout_mask(rows: int, width: int, p: float, active: bool) -> Tensor | None:
    """F.dropout's mask (Bernoulli(1 - p) / (1 - p)) for every packed position at once."""
    if not active or p == 0:
        return None
    return torch.empty(rows, width).bernoulli_(1 - p).div_(1 - p)


def _mm(x: Tensor, w: Tensor) -> Tensor:
    """``x @ w`` in ``w``'s dtype (bf16 under autocast), returned in fp32."""
    return torch.mm(x.to(w.dtype), w).float()


class _FusedDecoder(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, gates_ez, query_ez, w_feed_h, w_q_h_feed, w_out, b_out, keys, values,
                pos_key, pos_value, mask, one_hot, h_drop, feed_drop, batch_sizes, gemm):
        B, K, T, A = keys.shape
        H = gates_ez.size(1) // 4
        Fd = w_feed_h.size(1) - H  # width of the fed-back feature
        P = gates_ez.size(0)
        gates_ez, query_ez = gates_ez.detach().float(), query_ez.detach().float()
        w_fh, w_qhf, w_o = (w.detach().t().to(gemm) for w in (w_feed_h, w_q_h_feed, w_out))
        # both layouts of the memories, so every product reads them in place: (1, A) x
        # (A, T) for scores and d_alpha, (1, T) x (T, A) for contexts and d_q
        keys, values = keys.detach().to(gemm).contiguous(), values.detach().to(gemm).contiguous()
        keys_t, values_t = keys.transpose(-1, -2).contiguous(), values.transpose(-1, -2).contiguous()
        pos_key, pos_value = pos_key.detach().float(), pos_value.detach().float()
        b_out = b_out.detach().float()
        scale = 1 / math.sqrt(A)
        # what the backward pass reads, one row per packed position
        x_fh = gates_ez.new_empty(P, Fd + H)   # [feed_{t-1} ; h_{t-1}]
        acts = torch.empty_like(gates_ez)       # i, f, g, o
        cs = gates_ez.new_empty(P, H)
        x_q = gates_ez.new_empty(P, H + Fd)    # [h_t ; feed_{t-1}]
        qs = gates_ez.new_empty(P, K, A)
        alphas = gates_ez.new_empty(P, K, T)
        alpha_pos = gates_ez.new_empty(P, K, one_hot.size(2))
        x_out = gates_ez.new_empty(P, H + K * A)  # [dropout(h_t) ; contexts]
        ys = gates_ez.new_empty(P, w_out.size(0))
        scores = gates_ez.new_empty(P, K, T)
        h = c = gates_ez.new_zeros(B, H)
        feed = gates_ez.new_zeros(B, Fd)
        start = 0
        for t, n in enumerate(batch_sizes):
            rows = slice(start, start + n)
            start += n
            torch.cat([feed[:n], h[:n]], 1, out=x_fh[rows])
            gates = gates_ez[rows] + _mm(x_fh[rows], w_fh)
            act = acts[rows]
            torch.sigmoid(gates, out=act)
            torch.tanh(gates[:, 2 * H:3 * H], out=act[:, 2 * H:3 * H])
            i, f, g, o = act.chunk(4, 1)
            c = torch.addcmul(f * c[:n], i, g, out=cs[rows])
            h = o * torch.tanh(c)
            torch.cat([h, feed[:n]], 1, out=x_q[rows])
            q = torch.tanh(query_ez[rows] + _mm(x_q[rows], w_qhf), out=qs[rows].view(n, K * A))
            q = q.view(n, K, A)
            s = torch.matmul(q.to(gemm).unsqueeze(2), keys_t[:n]).squeeze(2).float()
            s += torch.matmul(torch.einsum("nka,kpa->nkp", q, pos_key), one_hot[t].t())
            s = torch.mul(s, scale, out=scores[rows]).masked_fill_(~mask[:n], MASKED)
            alpha = alphas[rows].copy_(torch.softmax(s, -1))
            ap = torch.matmul(alpha, one_hot[t], out=alpha_pos[rows])
            context = torch.matmul(alpha.to(gemm).unsqueeze(2), values[:n]).squeeze(2).float()
            context += torch.einsum("nkp,kpa->nka", ap, pos_value)
            h_out = h if h_drop is None else h * h_drop[rows]
            torch.cat([h_out, context.view(n, K * A)], 1, out=x_out[rows])
            y = torch.add(_mm(x_out[rows], w_o), b_out, out=ys[rows])
            feed = y if feed_drop is None else y * feed_drop[rows]
        ctx.save_for_backward(x_fh, acts, cs, x_q, qs, alphas, alpha_pos, x_out, mask, one_hot,
                              pos_key, pos_value, h_drop, feed_drop)
        ctx.gemm = (w_fh, w_qhf, w_o, keys, values_t)
        ctx.batch_sizes, ctx.dims = batch_sizes, (B, K, T, A, H, Fd)
        return ys, scores

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, d_ys, d_scores):
        (x_fh, acts, cs, x_q, qs, alphas, alpha_pos, x_out, mask, one_hot, pos_key, pos_value,
         h_drop, feed_drop) = ctx.saved_tensors
        w_fh, w_qhf, w_o, keys, values_t = ctx.gemm
        batch_sizes, (B, K, T, A, H, Fd) = ctx.batch_sizes, ctx.dims
        P = x_fh.size(0)
        scale = 1 / math.sqrt(A)
        d_ys = x_out.new_zeros(P, w_o.size(1)) if d_ys is None else d_ys.float()
        d_scores = x_out.new_zeros(P, K, T) if d_scores is None else d_scores.float()
        d_gates, d_query = torch.empty_like(acts), x_q.new_empty(P, K * A)
        d_y, d_context = torch.empty_like(d_ys), x_out.new_empty(P, K, A)
        d_s, d_q_pos = x_out.new_empty(P, K, T), torch.empty_like(alpha_pos)
        # gradients w.r.t. the state entering each step, from the steps after it
        d_h, d_c, d_feed = x_out.new_zeros(B, H), x_out.new_zeros(B, H), x_out.new_zeros(B, Fd)
        w_fh_t, w_qhf_t, w_o_t = w_fh.t(), w_qhf.t(), w_o.t()
        ends = torch.tensor([0] + batch_sizes).cumsum(0).tolist()
        for t in range(len(batch_sizes) - 1, -1, -1):
            n, rows = batch_sizes[t], slice(ends[t], ends[t + 1])
            dy = d_ys[rows] + (d_feed[:n] if feed_drop is None else d_feed[:n] * feed_drop[rows])
            d_y[rows] = dy
            dx_out = _mm(dy, w_o_t)  # (n, H + K*A)
            dctx = d_context[rows].view(n, K * A).copy_(dx_out[:, H:]).view(n, K, A)
            alpha = alphas[rows]
            d_alpha = torch.matmul(dctx.to(values_t.dtype).unsqueeze(2), values_t[:n]).squeeze(2).float()
            d_alpha += torch.matmul(torch.einsum("nka,kpa->nkp", dctx, pos_value), one_hot[t].t())
            ds = alpha * (d_alpha - (d_alpha * alpha).sum(-1, keepdim=True)) + d_scores[rows]
            ds = torch.mul(ds * mask[:n], scale, out=d_s[rows])  # masked scores get none
            dq = torch.matmul(ds.to(keys.dtype).unsqueeze(2), keys[:n]).squeeze(2).float()
            dqp = torch.matmul(ds, one_hot[t], out=d_q_pos[rows])
            dq += torch.einsum("nkp,kpa->nka", dqp, pos_key)
            q = qs[rows]
            dq_pre = torch.mul(dq, 1 - q * q, out=d_query[rows].view(n, K, A)).view(n, K * A)
            dx_q = _mm(dq_pre, w_qhf_t)  # (n, H + F): [h_t ; feed_{t-1}]
            dh_out = dx_out[:, :H] if h_drop is None else dx_out[:, :H] * h_drop[rows]
            dh = d_h[:n] + dx_q[:, :H] + dh_out
            i, f, g, o = acts[rows].chunk(4, 1)
            c = cs[rows]
            c_prev = cs[ends[t - 1]:ends[t - 1] + n] if t > 0 else torch.zeros_like(c)
            tanh_c = torch.tanh(c)
            dc = d_c[:n] + dh * o * (1 - tanh_c * tanh_c)
            dg = d_gates[rows]
            dgi, dgf, dgg, dgo = dg.chunk(4, 1)
            torch.mul(dc * g, i * (1 - i), out=dgi)
            torch.mul(dc * c_prev, f * (1 - f), out=dgf)
            torch.mul(dc * i, 1 - g * g, out=dgg)
            torch.mul(dh * tanh_c, o * (1 - o), out=dgo)
            dx_fh = _mm(dg, w_fh_t)  # (n, F + H): [feed_{t-1} ; h_{t-1}]
            d_h[:n] = dx_fh[:, Fd:]
            d_c[:n] = dc * f
            d_feed[:n] = dx_fh[:, :Fd] + dx_q[:, H:]
        # every weight's gradient in one product over all steps
        d_w_feed_h = torch.mm(d_gates.t().to(w_fh.dtype), x_fh.to(w_fh.dtype)).float()
        d_w_q = torch.mm(d_query.t().to(w_qhf.dtype), x_q.to(w_qhf.dtype)).float()
        d_w_out = torch.mm(d_y.t().to(w_o.dtype), x_out.to(w_o.dtype)).float()
        d_b_out = d_y.sum(0)
        # memories: per (row, prototype), a sum over the steps -> padded (B, K, steps, .)
        where = _padded_index(batch_sizes)
        steps = len(batch_sizes)
        d_keys = torch.matmul(_padded(d_s, where, B, steps).transpose(-1, -2).to(keys.dtype),
                              _padded(qs, where, B, steps).to(keys.dtype))
        d_values = torch.matmul(_padded(alphas, where, B, steps).transpose(-1, -2).to(keys.dtype),
                                _padded(d_context, where, B, steps).to(keys.dtype))
        d_pos_key = torch.einsum("pkq,pka->kqa", d_q_pos, qs)
        d_pos_value = torch.einsum("pkq,pka->kqa", alpha_pos, d_context)
        return (d_gates, d_query, d_w_feed_h, d_w_q, d_w_out, d_b_out, d_keys, d_values,
                d_pos_key, d_pos_value) + (None,) * 6


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
