"""Attention over K memories at once, each with its own parameters.

Prototypes are padded to one common length and stacked, so K prototypes are one tensor
``(B, K, T, D)`` and K attention modules are one module whose weights carry a leading K
axis. No Python lists of tensors, no data-dependent control flow: the same code runs
eagerly, under TorchScript and through ONNX export.

Two forms, as in the two task variants of the generator:

* ``PositionalAttention`` (SCAN): key, query and value are tanh dense layers, the query
  also meets learned relative-position vectors (window ``kpos``), scores are scaled by
  1/sqrt(A). The scaled, masked scores are also the copy scores of the joint softmax.
* ``DotAttention`` (SIGMORPHON, and the conditional seq2seq model): key is a linear map
  of the memory, query and value are the identity, no scaling. Needs A == H.

Masks are boolean, True = a real position. Masked scores get -1e18 as in the reference.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

MASKED = -1e18


def uniform_(tensor: Tensor, bound: float) -> Tensor:
    with torch.no_grad():
        return tensor.uniform_(-bound, bound)


class StackedLinear(nn.Module):
    """K independent dense layers ``in -> out``; input ``(B, K, ..., in)``."""

    def __init__(self, k: int, d_in: int, d_out: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(k, d_out, d_in))
        self.bias = nn.Parameter(torch.empty(k, d_out))
        uniform_(self.weight, 1 / math.sqrt(d_in))
        uniform_(self.bias, 1 / math.sqrt(d_in))

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() == 4:  # (B, K, T, in): memories, one product per layer: an ONNX MatMul
            # with a constant weight (int8-quantisable, 1.2x faster than ONNX Runtime's einsum)
            return torch.stack([nn.functional.linear(x[:, k], self.weight[k], self.bias[k])
                                for k in range(self.weight.size(0))], 1)
        return torch.einsum("bki,koi->bko", x, self.weight) + self.bias[None]


def relative_positions(step: Tensor, length: int, kpos: int) -> Tensor:
    """Offset index ``(B, T)`` in [0, 2*kpos]: clip(j - t, -kpos, kpos) + kpos for memory
    positions j at decoder step t."""
    j = torch.arange(length, device=step.device)
    return (j[None, :] - step[:, None]).clamp(-kpos, kpos) + kpos


class PositionalAttention(nn.Module):
    """tanh key/query/value attention with relative-position terms, scaled by 1/sqrt(A)."""

    def __init__(self, k: int, mem_dim: int, query_dim: int, att_dim: int, kpos: int):
        super().__init__()
        self.att_dim, self.kpos = att_dim, kpos
        self.key = StackedLinear(k, mem_dim, att_dim)
        self.value = StackedLinear(k, mem_dim, att_dim)
        self.query = StackedLinear(k, query_dim, att_dim)
        npos = 2 * kpos + 1
        self.pos_key = nn.Parameter(uniform_(torch.empty(k, npos, att_dim), 1 / math.sqrt(npos)))
        self.pos_value = nn.Parameter(
            uniform_(torch.empty(k, npos, att_dim), math.sqrt(6 / (npos + att_dim))))

    def memory(self, enc: Tensor) -> tuple[Tensor, Tensor]:
        """Keys and values of the encoder outputs ``(B, K, T, 2H)``: computed once."""
        # contiguous once here, so the per-step matmuls never copy them
        return torch.tanh(self.key(enc)).contiguous(), torch.tanh(self.value(enc)).contiguous()

    def forward(self, query: Tensor, keys: Tensor, values: Tensor, mask: Tensor,
                step: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """query ``(B, Q)`` -> context ``(B, K, A)``, scores ``(B, K, T)``, weights."""
        B, k = query.size(0), keys.size(1)
        # the K query layers read the same vector: one (B, Q) x (Q, K*A) product
        q = torch.tanh(nn.functional.linear(query, self.query.weight.reshape(-1, query.size(1)),
                                            self.query.bias.reshape(-1)).view(B, k, -1))
        # batched matmuls on the (B, K, T, A) memories read them in place (einsum copied
        # keys and values on every step); the query is the left factor, as torch's CPU
        # kernels for a (T, A) x (A, 1) product are several times slower than for
        # (1, A) x (A, T)
        scores = torch.matmul(q.unsqueeze(-2), keys.transpose(-1, -2)).squeeze(-2)  # (B, K, T)
        # the position terms are gathered / scattered by offset index: a one-hot (B, T, P)
        # matrix and two more contractions per step cost more than the attention itself
        offset = relative_positions(step, keys.size(2), self.kpos)[:, None, :].expand(-1, k, -1)
        q_pos = torch.einsum("bka,kpa->bkp", q, self.pos_key)  # query . R_k for every offset
        scores = scores + q_pos.gather(2, offset)
        scores = scores / math.sqrt(self.att_dim)
        scores = scores.masked_fill(~mask, MASKED)
        alpha = torch.softmax(scores, dim=-1)
        context = torch.matmul(alpha.unsqueeze(-2), values).squeeze(-2)  # (B, K, A)
        # mass per offset, in alpha's dtype (under bf16 autocast q_pos is bf16, alpha fp32)
        alpha_pos = alpha.new_zeros(q_pos.shape).scatter_add(2, offset, alpha)
        context = context + torch.einsum("bkp,kpa->bka", alpha_pos, self.pos_value)
        return context, scores, alpha


class DotAttention(nn.Module):
    """score_j = h . (W m_j + b), unscaled; context = sum_j alpha_j m_j."""

    def __init__(self, k: int, mem_dim: int, att_dim: int):
        super().__init__()
        self.key = StackedLinear(k, mem_dim, att_dim)

    def memory(self, enc: Tensor) -> tuple[Tensor, Tensor]:
        return self.key(enc), enc

    def forward(self, query: Tensor, keys: Tensor, values: Tensor,
                mask: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        scores = torch.einsum("bh,bkth->bkt", query, keys).masked_fill(~mask, MASKED)
        alpha = torch.softmax(scores, dim=-1)
        return torch.einsum("bkt,bkth->bkh", alpha, values), scores, alpha
