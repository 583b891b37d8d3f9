"""LSTM directions over rows of different lengths, for training.

Rows sorted by length (longest first) are packed step-major as in a PackedSequence: the
inputs of step t are rows ``0 .. n_t - 1``, n_t the number of rows longer than t. Each step
multiplies only the rows still running, and the backward pass is written by hand so the
recurrent weight's gradient is ONE product over all steps (``d_gates^T . h_prev``) instead
of one per step: torch's oneDNN LSTM backward spends a fixed time per time step that, at
the batch sizes here, costs more than the products themselves. Several directions with
the same lengths (the two of a BiLSTM) run in one loop, their products batched.

The cell states and the gate nonlinearities stay fp32; under CPU bf16 autocast the
products (and the weight-gradient product) run in bf16, as oneDNN would, and the hidden
states are returned in bf16.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor

from compgen.models.native import loop_for


def explicit_dtypes(method):
    """For the forward and backward of an autograd function that chooses the dtype of
    every product itself: runs it with CPU autocast off (autocast would cast the fp32
    products to bf16, and copy their inputs on every step)."""
    @functools.wraps(method)
    def run(*args):
        with torch.autocast("cpu", enabled=False):
            return method(*args)
    return run


# oneDNN builds (JIT-compiles) a kernel for every new matrix shape it meets, ~3 ms each
# here, and the packed position counts P of a batch's products differ from batch to
# batch: 5-30x the products' own time. Products over P positions pad P with zero rows to
# a multiple of ROW_BUCKET, so a few shapes recur and their kernels are reused.
ROW_BUCKET = 64


def bucketed_rows(x: Tensor, dim: int = 0) -> Tensor:
    """``x`` with zero rows appended along ``dim`` up to a multiple of ROW_BUCKET."""
    pad = -x.size(dim) % ROW_BUCKET
    if pad == 0:
        return x
    shape = list(x.shape)
    shape[dim] = pad
    return torch.cat([x, x.new_zeros(shape)], dim)


def rows_linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """F.linear over the rows of ``x`` ``(P, in)``, its row count bucketed (ROW_BUCKET)."""
    return torch.nn.functional.linear(bucketed_rows(x), weight, bias)[:x.size(0)]


def rows_gradient(a: Tensor, b: Tensor) -> Tensor:
    """``a^T b`` summed over the rows of ``a`` ``(..., P, M)`` and ``b`` ``(..., P, N)``: a
    weight's gradient, with the row count bucketed (ROW_BUCKET)."""
    return torch.matmul(bucketed_rows(a, -2).transpose(-1, -2), bucketed_rows(b, -2))


def tanh(x: Tensor, out: Tensor | None = None) -> Tensor:
    """tanh(x) as 2 sigmoid(2x) - 1: equal to 2e-7 and about 3x faster than ``torch.tanh``,
    which this torch's CPU kernels do not vectorise (166 vs 50 us on 64k floats)."""
    return torch.sigmoid(x * 2, out=out).mul_(2).sub_(1)


def gate_activations(gates: Tensor, out: Tensor, hidden: int) -> Tensor:
    """The LSTM gates ``(..., 4H)`` (i, f, g, o) after their nonlinearities, into ``out``:
    one sigmoid over all four, tanh(g) from it as above. ``gates`` is overwritten."""
    g = slice(2 * hidden, 3 * hidden)
    gates[..., g] *= 2
    torch.sigmoid(gates, out=out)
    out[..., g].mul_(2).sub_(1)
    return out


def packed_index(lengths: Tensor, length: int) -> tuple[Tensor, list[int]]:
    """Rows of lengths ``lengths`` (sorted, longest first) padded to ``length``: the flat
    index (row * length + step) of every real position in step-major order, and the
    number of rows running at each step."""
    steps = torch.arange(length)
    running = steps[:, None] < lengths[None, :]  # (steps, rows)
    step, row = running.nonzero(as_tuple=True)
    batch_sizes = running.sum(1)
    return row * length + step, batch_sizes[batch_sizes > 0].tolist()


def lstm_directions(inputs: list[Tensor], batch_sizes: list[int], weights: list[list[Tensor]],
                    starts: list[tuple[Tensor, Tensor] | None] | None = None,
                    native=None) -> tuple[Tensor, Tensor]:
    """D directions over packed inputs ``inputs[d]`` ``(P, E)`` with the same
    ``batch_sizes``: the hidden and cell states ``(D, P, H)`` after every step, packed the
    same way. ``weights[d]`` = [W_ih, W_hh, b_ih, b_hh] as in nn.LSTM; ``starts[d]`` =
    (h0, c0) ``(n_0, H)`` (zeros if None). ``native``: the compiled loops
    (:func:`compgen.models.native.loops`) to run the steps with, else the Python loops."""
    w_ih, w_hh, b_ih, b_hh = (torch.stack(w) for w in zip(*weights))
    # the input part of every step in one product per direction
    P = inputs[0].size(0)
    gates_in = torch.baddbmm((b_ih + b_hh)[:, None], bucketed_rows(torch.stack(inputs), 1),
                             w_ih.transpose(1, 2))[:, :P]
    rows, hidden = batch_sizes[0] if batch_sizes else 0, w_hh.size(2)
    zeros = gates_in.new_zeros(rows, hidden, dtype=torch.float32)
    starts = starts or [None] * len(inputs)
    h0 = torch.stack([zeros if s is None else s[0].float() for s in starts])
    c0 = torch.stack([zeros if s is None else s[1].float() for s in starts])
    gemm = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32
    return _PackedLSTM.apply(gates_in, w_hh, h0, c0, batch_sizes, gemm, native)


class _PackedLSTM(torch.autograd.Function):
    @staticmethod
    @explicit_dtypes
    def forward(ctx, gates_in, w_hh, h0, c0, batch_sizes, gemm, native):
        D, P, H = gates_in.size(0), gates_in.size(1), w_hh.size(2)
        w = w_hh.detach().to(gemm).transpose(1, 2)  # (D, H, 4H): a view, cast once
        ctx.w, ctx.batch_sizes, ctx.native = w, batch_sizes, native
        if native is not None:  # reads the gates' input part in the products' dtype
            acts, hs, cs, tanh_cs = loop_for(native, "lstm_forward", gemm)(
                gates_in.detach().to(gemm), w.transpose(1, 2), h0, c0, batch_sizes)
            ctx.save_for_backward(acts, hs, cs, tanh_cs, h0, c0)
            return hs, cs
        gates_in = gates_in.detach().float()
        acts = torch.empty_like(gates_in)  # i, f, g, o after their nonlinearities
        hs, cs = gates_in.new_empty(D, P, H, dtype=gemm), gates_in.new_empty(D, P, H)
        tanh_cs = torch.empty_like(cs)  # kept for the backward pass
        h, c, offset = h0.to(gemm), c0, 0
        for n in batch_sizes:
            rows = slice(offset, offset + n)
            gates = gates_in[:, rows] + torch.bmm(h[:, :n], w)
            i, f, g, o = gate_activations(gates, acts[:, rows], H).chunk(4, 2)
            c = torch.addcmul(f * c[:, :n], i, g, out=cs[:, rows])
            h = torch.mul(o, tanh(c, out=tanh_cs[:, rows]), out=hs[:, rows])
            offset += n
        ctx.save_for_backward(acts, hs, cs, tanh_cs, h0, c0)
        return hs, cs

    @staticmethod
    @explicit_dtypes
    def backward(ctx, d_hs, d_cs):
        acts, hs, cs, tanh_cs, h0, c0 = ctx.saved_tensors
        w, batch_sizes = ctx.w, ctx.batch_sizes
        w_t = w.transpose(1, 2)
        if ctx.native is not None:
            d_hs = torch.zeros_like(hs) if d_hs is None else d_hs.to(hs.dtype).contiguous()
            d_cs = None if d_cs is None else d_cs.float().contiguous()
            d_gates, h_prev, d_h, d_c = loop_for(ctx.native, "lstm_backward", w_t.dtype)(
                acts, hs, cs, tanh_cs, h0, c0, d_hs, d_cs, w_t, batch_sizes)
            d_w = rows_gradient(d_gates, h_prev).float()  # (D, 4H, H)
            return d_gates, d_w, d_h, d_c, None, None, None
        d_hs = torch.zeros_like(cs) if d_hs is None else d_hs.float()
        d_cs = torch.zeros_like(cs) if d_cs is None else d_cs.float()
        d_gates = acts.new_empty(acts.shape, dtype=w.dtype)
        h_prev = torch.empty_like(hs)  # the state each step read, packed like the steps
        d_h, d_c = torch.zeros_like(h0), torch.zeros_like(c0)  # into each row's step
        ends = torch.tensor([0] + batch_sizes).cumsum(0).tolist()
        for t in range(len(batch_sizes) - 1, -1, -1):
            n, rows = batch_sizes[t], slice(ends[t], ends[t + 1])
            prev = slice(ends[t - 1], ends[t - 1] + n) if t > 0 else None
            c_prev = cs[:, prev] if prev else c0[:, :n]
            h_prev[:, rows] = hs[:, prev] if prev else h0[:, :n]
            i, f, g, o = acts[:, rows].chunk(4, 2)
            tanh_c = tanh_cs[:, rows]
            dh = d_hs[:, rows] + d_h[:, :n]
            dc = d_cs[:, rows] + d_c[:, :n] + dh * o * (1 - tanh_c * tanh_c)
            dg = d_gates[:, rows]
            dgi, dgf, dgg, dgo = dg.chunk(4, 2)
            torch.mul(dc * g, i * (1 - i), out=dgi)
            torch.mul(dc * c_prev, f * (1 - f), out=dgf)
            torch.mul(dc * i, 1 - g * g, out=dgg)
            torch.mul(dh * tanh_c, o * (1 - o), out=dgo)
            d_h[:, :n] = torch.bmm(dg, w_t)
            d_c[:, :n] = dc * f
        d_w = rows_gradient(d_gates, h_prev).float()  # (D, 4H, H)
        return d_gates, d_w, d_h, d_c, None, None, None
