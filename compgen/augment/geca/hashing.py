"""64-bit polynomial hashes of token sequences, computed piecewise from prefix sums so a
template or a realised example is hashed at the cost of its replaced spans."""

from __future__ import annotations

import numpy as np

U64 = np.uint64


def mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser (uint64 -> uint64), wrapping arithmetic."""
    x = x.astype(U64) + U64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> U64(30))) * U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> U64(27))) * U64(0x94D049BB133111EB)
    return x ^ (x >> U64(31))


class _PolyHash:
    """Polynomial hash mod 2^64 of token sequences held in one flat array, with rewrites.

    ``H(t_0..t_{n-1}) = sum hv[t_i] B^i``. A rewritten sequence (occurrences replaced by
    other strings) is hashed piecewise from the prefix sums G of the flat array, so the
    cost is per replaced occurrence. Two independent instances are combined (128 bits of
    state folded into one 64-bit key)."""

    def __init__(self, flat: np.ndarray, n_ids: int, max_len: int, seed: int):
        rng = np.random.default_rng(seed)
        self.hv = rng.integers(0, 2**63, size=n_ids, dtype=np.int64).astype(U64) * U64(2) + U64(1)
        base = int(rng.integers(2**40, 2**62)) * 2 + 1
        n_pow = len(flat) + max_len + 2
        self.bp = np.multiply.accumulate(np.full(n_pow, base, dtype=U64))
        self.bp = np.concatenate([np.ones(1, U64), self.bp[:-1]])
        inv = pow(base, -1, 2**64)
        self.binvp = np.concatenate([np.ones(1, U64), np.multiply.accumulate(np.full(n_pow - 1, inv, dtype=U64))])
        terms = self.hv[flat] * self.bp[: len(flat)]
        self.g = np.concatenate([np.zeros(1, U64), np.cumsum(terms, dtype=U64)])

    def pow_signed(self, e: np.ndarray) -> np.ndarray:
        """B^-e for integer e of either sign."""
        return np.where(e >= 0, self.binvp[np.maximum(e, 0)], self.bp[np.maximum(-e, 0)])

    def span(self, start: np.ndarray, length: np.ndarray) -> np.ndarray:
        """Hash of flat[start:start+length] as a sequence of its own."""
        return (self.g[start + length] - self.g[start]) * self.binvp[start]

    def rewrites(self, lo, hi, row_inst, row_pos, row_len, row_hash, row_rlen) -> np.ndarray:
        """Hash of flat[lo_i:hi_i] for every instance i with its rows applied: row j
        replaces flat[pos_j : pos_j+len_j] by a string of hash row_hash_j and length
        row_rlen_j. Rows sorted by (instance, pos), non-overlapping, inside [lo, hi)."""
        out = (self.g[hi] - self.g[lo]) * self.binvp[lo]
        if len(row_inst) == 0:
            return out
        first = np.ones(len(row_inst), bool)
        first[1:] = row_inst[1:] != row_inst[:-1]
        last = np.ones(len(row_inst), bool)
        last[:-1] = first[1:]
        starts = np.flatnonzero(first)
        d = (row_len - row_rlen).astype(np.int64)
        cs = np.cumsum(d)
        excl = cs - d
        s_before = excl - np.repeat(excl[starts], np.diff(np.append(starts, len(row_inst))))
        s_after = s_before + d
        nxt = np.empty_like(row_pos)
        nxt[:-1] = row_pos[1:]
        nxt = np.where(last, hi[row_inst], nxt)
        lo_r = lo[row_inst]
        term = row_hash * self.bp[row_pos - lo_r - s_before]
        term += (self.g[nxt] - self.g[row_pos + row_len]) * self.pow_signed(lo_r + s_after)
        sums = np.add.reduceat(term, starts)
        inst = row_inst[starts]
        # replace the un-rewritten tail [first occurrence, hi) counted in `out`
        out[inst] -= (self.g[hi[inst]] - self.g[row_pos[starts]]) * self.binvp[lo[inst]]
        out[inst] += sums
        return out


class Hasher:
    def __init__(self, flat, n_ids, max_len):
        self.h = [_PolyHash(flat, n_ids, max_len, seed) for seed in (0x5EED1, 0x5EED2)]

    def span(self, start, length):
        a, b = (h.span(start, length) for h in self.h)
        return a, b

    def rewrites(self, lo, hi, row_inst, row_pos, row_len, row_hash, row_rlen):
        """row_hash: pair (h1 values, h2 values). Returns one folded 64-bit key."""
        a = self.h[0].rewrites(lo, hi, row_inst, row_pos, row_len, row_hash[0], row_rlen)
        b = self.h[1].rewrites(lo, hi, row_inst, row_pos, row_len, row_hash[1], row_rlen)
        return a ^ mix(b)
