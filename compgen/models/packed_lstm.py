"""One LSTM direction over rows of different lengths, for training.

Rows sorted by length (longest first) are packed step-major as in a PackedSequence: the
inputs of step t are rows ``0 .. n_t - 1``, n_t the number of rows longer than t. Each step
multiplies only the rows still running, and the backward pass is written by hand so the
recurrent weight's gradient is ONE product over all steps (``d_gates^T . h_prev``) instead
of one per step: torch's oneDNN LSTM backward spends a fixed time per time step that, at
the batch sizes here, costs more than the products themselves.

Weights, states and the gate nonlinearities stay fp32; under CPU bf16 autocast the step
products (and the final weight-gradient product) run in bf16, as oneDNN would.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def packed_index(lengths: Tensor, length: int) -> tuple[Tensor, list[int]]:
    """Rows of lengths ``lengths`` (sorted, longest first) padded to ``length``: the flat
    index (row * length + step) of every real position in step-major order, and the
    number of rows running at each step."""
    steps = torch.arange(length)
    running = steps[:, None] < lengths[None, :]  # (steps, rows)
    step, row = running.nonzero(as_tuple=True)
    batch_sizes = running.sum(1)
    return row * length + step, batch_sizes[batch_sizes > 0].tolist()


def lstm_direction(x: Tensor, batch_sizes: list[int], weights: list[Tensor],
                   start: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    """Packed inputs ``x`` ``(P, E)`` -> the hidden and cell states ``(P, H)`` after every
    step, packed the same way. ``weights`` = [W_ih, W_hh, b_ih, b_hh] as in nn.LSTM;
    ``start`` = (h0, c0) ``(n_0, H)`` (zeros if None)."""
    w_ih, w_hh, b_ih, b_hh = weights
    gates_in = F.linear(x, w_ih, b_ih + b_hh)  # the input part of every step in one product
    if start is None:
        zeros = x.new_zeros(batch_sizes[0] if batch_sizes else 0, w_hh.size(1))
        start = (zeros, zeros)
    gemm = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32
    return _PackedLSTM.apply(gates_in, w_hh, start[0].float(), start[1].float(), batch_sizes, gemm)


class _PackedLSTM(torch.autograd.Function):
    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu")
    def forward(ctx, gates_in, w_hh, h0, c0, batch_sizes, gemm_dtype):
        H = w_hh.size(1)
        w = w_hh.detach().to(gemm_dtype)
        gates_in = gates_in.detach().float()
        acts = torch.empty_like(gates_in)  # i, f, g, o after their nonlinearities
        hs, cs = gates_in.new_empty(gates_in.size(0), H), gates_in.new_empty(gates_in.size(0), H)
        h, c, offset = h0, c0, 0
        for n in batch_sizes:
            rows = slice(offset, offset + n)
            gates = gates_in[rows] + torch.mm(h[:n].to(gemm_dtype), w.t()).float()
            act = acts[rows]
            torch.sigmoid(gates, out=act)
            torch.tanh(gates[:, 2 * H:3 * H], out=act[:, 2 * H:3 * H])
            i, f, g, o = act.chunk(4, 1)
            c = torch.addcmul(f * c[:n], i, g, out=cs[rows])
            h = torch.mul(o, torch.tanh(c), out=hs[rows])
            offset += n
        ctx.save_for_backward(acts, hs, cs, h0, c0)
        ctx.w, ctx.batch_sizes = w, batch_sizes
        return hs, cs

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, d_hs, d_cs):
        acts, hs, cs, h0, c0 = ctx.saved_tensors
        w, batch_sizes = ctx.w, ctx.batch_sizes
        d_hs = torch.zeros_like(hs) if d_hs is None else d_hs.float()
        d_cs = torch.zeros_like(cs) if d_cs is None else d_cs.float()
        d_gates = torch.empty_like(acts)
        h_prev = torch.empty_like(hs)  # the state each step read, packed like the steps
        d_h, d_c = torch.zeros_like(h0), torch.zeros_like(c0)  # into each row's step
        ends = torch.tensor([0] + batch_sizes).cumsum(0).tolist()
        for t in range(len(batch_sizes) - 1, -1, -1):
            n, rows = batch_sizes[t], slice(ends[t], ends[t + 1])
            prev = slice(ends[t - 1], ends[t - 1] + n) if t > 0 else None
            c_prev = cs[prev] if prev else c0[:n]
            h_prev[rows] = hs[prev] if prev else h0[:n]
            i, f, g, o = acts[rows].chunk(4, 1)
            tanh_c = torch.tanh(cs[rows])
            dh = d_hs[rows] + d_h[:n]
            dc = d_cs[rows] + d_c[:n] + dh * o * (1 - tanh_c * tanh_c)
            dg = d_gates[rows]
            dgi, dgf, dgg, dgo = dg.chunk(4, 1)
            torch.mul(dc * g, i * (1 - i), out=dgi)
            torch.mul(dc * c_prev, f * (1 - f), out=dgf)
            torch.mul(dc * i, 1 - g * g, out=dgg)
            torch.mul(dh * tanh_c, o * (1 - o), out=dgo)
            d_h[:n] = torch.mm(dg.to(w.dtype), w).float()
            d_c[:n] = dc * f
        d_w = torch.mm(d_gates.t().to(w.dtype), h_prev.to(w.dtype)).float()
        return d_gates, d_w, d_h, d_c, None, None
