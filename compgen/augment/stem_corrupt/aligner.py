"""CRP Gibbs character aligner (Hulden's string-pair aligner, as used by STEM-CORRUPT).

Every (lemma, form) pair of a file is aligned jointly by 1:1, 1:0 and 0:1 character
moves (0 = epsilon). A move a:b costs ``-ln((c(a,b) + prior) / (N + D * prior))`` where
c counts the pair in the current alignments of all pairs, N is the total count and D
the number of distinct pairs with c > 0. Training starts from the left-aligned
alignment, then resamples each pair in turn (remove its counts, fill a forward trellis
with log-sum-exp, sample a path backwards, add its counts) for ``iterations`` sweeps;
the final alignment is each pair's minimum-cost path under the final counts.

``compat=True`` reproduces the reference implementation's behaviour instead:

* N is incremented when counts are added but never decremented when removed;
* counts (and N, D) accumulate over every ``align`` call of one :class:`CrpAligner`
  (the reference never clears its table between calls in one process);
* the sampler walks the trellis diagonal only, drawing a back-pointer at each diagonal
  cell, then follows back-pointers left over from earlier trellis fills elsewhere;
* the random stream is drand48's from its default (unseeded) state.

Words are aligned as sequences of grapheme clusters (``graphemes``), so a combining mark
moves with its base; ``align_clusters`` gives the aligned clusters with ``""`` for epsilon.
The inner loops are compiled with numba. Both modes draw their uniforms from the same
48-bit linear congruential generator (drand48); the paper mode seeds it (srand48).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from compgen.augment.stem_corrupt.graphemes import graphemes
from compgen.configs.defaults import defaults_from
from compgen.configs.stem_corrupt_run import STEM_CORRUPT_PRESET
from compgen.errors import UserError

MAX_LEN = 255   # the reference's fixed trellis; longer words are refused
EPSILON = " "   # how an epsilon is rendered in the aligned strings
LEFT, DIAG, DOWN = -1, 0, 1   # insertion (eps:out), match/substitution, deletion (in:eps)
_DRAND48_DEFAULT = 0x1234ABCD330E
_MASK48 = (1 << 48) - 1


@dataclass(frozen=True)
@defaults_from(STEM_CORRUPT_PRESET, "aligner")
class AlignerConfig:
    iterations: int
    burnin: int     # with lag: only select sweeps for a global table nothing reads
    lag: int
    prior: float
    compat: bool

    def validate(self) -> None:
        if self.iterations < 0:
            raise UserError(f"aligner iterations must be >= 0 (got {self.iterations})")
        if self.prior <= 0:
            raise UserError(f"aligner prior must be > 0 (got {self.prior})")


@njit(cache=True, error_model="numpy")
def _uniform(rng):
    rng[0] = (rng[0] * np.uint64(0x5DEECE66D) + np.uint64(0xB)) & np.uint64(_MASK48)
    return rng[0] / 281474976710656.0   # 2**48


@njit(cache=True, error_model="numpy")
def _cost(counts, stats, prior, a, b):
    # an empty table (one pair aligned on its own) makes every move cost 0
    return -np.log((counts[a, b] + prior) / max(stats[0] + stats[1] * prior, prior))


@njit(cache=True, error_model="numpy")
def _add(counts, stats, ain, aout, n):
    for k in range(n):
        counts[ain[k], aout[k]] += 1
        stats[0] += 1
        if counts[ain[k], aout[k]] == 1:
            stats[1] += 1


@njit(cache=True, error_model="numpy")
def _remove(counts, stats, ain, aout, n, keep_total):
    for k in range(n):
        counts[ain[k], aout[k]] -= 1
        if not keep_total:
            stats[0] -= 1
        if counts[ain[k], aout[k]] == 0:
            stats[1] -= 1


@njit(cache=True, error_model="numpy")
def _log_add(p, q):
    """-log(exp(-p) + exp(-q)) for negative log probabilities."""
    lo = min(p, q)
    hi = max(p, q)
    if hi - lo > 80.0:
        return lo
    return lo - np.log(1.0 + np.exp(lo - hi))


@njit(cache=True, error_model="numpy")
def _draw3(rng, a, b, c):
    """Index -1, 0, 1 drawn with probability proportional to exp(-a), exp(-b), exp(-c)."""
    m = min(a, min(b, c))
    if m >= 2.0:   # shift so the most probable is 2, against underflow
        a -= m - 2.0
        b -= m - 2.0
        c -= m - 2.0
    a = np.exp(-a)
    b = np.exp(-b)
    c = np.exp(-c)
    r = _uniform(rng) * (a + b + c)
    if r < a:
        return -1
    if r < a + b:
        return 0
    return 1


@njit(cache=True, error_model="numpy")
def _align_pair(src, tgt, counts, stats, prior, trellis, back, sample, compat, rng, ain, aout):
    """Fill the trellis of one pair (x = form position, y = lemma position) and write
    the sampled (``sample``) or minimum-cost path into ain/aout; returns its length."""
    n_in = src.shape[0]
    n_out = tgt.shape[0]
    trellis[0, 0] = 0.0
    for x in range(1, n_out + 1):
        trellis[x, 0] = trellis[x - 1, 0] + _cost(counts, stats, prior, 0, tgt[x - 1])
        back[x, 0] = LEFT
    for y in range(1, n_in + 1):
        trellis[0, y] = trellis[0, y - 1] + _cost(counts, stats, prior, src[y - 1], 0)
        back[0, y] = DOWN
    for x in range(1, n_out + 1):
        for y in range(1, n_in + 1):
            left = trellis[x - 1, y] + _cost(counts, stats, prior, 0, tgt[x - 1])
            down = trellis[x, y - 1] + _cost(counts, stats, prior, src[y - 1], 0)
            diag = trellis[x - 1, y - 1] + _cost(counts, stats, prior, src[y - 1], tgt[x - 1])
            if sample:
                trellis[x, y] = _log_add(_log_add(left, diag), down)
            else:
                # ties prefer deletion; insertion/substitution ties prefer substitution
                if left < diag:
                    best = LEFT if left < down else DOWN
                else:
                    best = DIAG if diag < down else DOWN
                back[x, y] = best
                trellis[x, y] = left if best == LEFT else (diag if best == DIAG else down)
    if sample:
        x = n_out
        y = n_in
        while x > 0 or y > 0:
            if x == 0:
                y -= 1
            elif y == 0:
                x -= 1
            else:
                left = trellis[x - 1, y] + _cost(counts, stats, prior, 0, tgt[x - 1])
                down = trellis[x, y - 1] + _cost(counts, stats, prior, src[y - 1], 0)
                diag = trellis[x - 1, y - 1] + _cost(counts, stats, prior, src[y - 1], tgt[x - 1])
                move = _draw3(rng, left, diag, down)
                back[x, y] = move
                if compat:   # the reference steps diagonally whatever it drew
                    x -= 1
                    y -= 1
                elif move == LEFT:
                    x -= 1
                elif move == DOWN:
                    y -= 1
                else:
                    x -= 1
                    y -= 1
    # follow the back-pointers from the end, then reverse
    k = 0
    x = n_out
    y = n_in
    while x > 0 or y > 0:
        move = back[x, y]
        if move == DIAG:
            x -= 1
            y -= 1
            ain[k] = src[y]
            aout[k] = tgt[x]
        elif move == LEFT:
            x -= 1
            ain[k] = 0
            aout[k] = tgt[x]
        else:
            y -= 1
            ain[k] = src[y]
            aout[k] = 0
        k += 1
    ain[:k] = ain[:k][::-1].copy()
    aout[:k] = aout[:k][::-1].copy()
    return k


@njit(cache=True, error_model="numpy")
def _crp_align(ins, in_off, outs, out_off, counts, stats, prior, iterations, compat,
               rng, back, ain, aout, alen):
    n_pairs = in_off.shape[0] - 1
    trellis = np.zeros(back.shape, dtype=np.float64)
    for p in range(n_pairs):   # initial left-aligned alignment, epsilons padded at the end
        src = ins[in_off[p]:in_off[p + 1]]
        tgt = outs[out_off[p]:out_off[p + 1]]
        n = max(src.shape[0], tgt.shape[0])
        for k in range(n):
            ain[p, k] = src[k] if k < src.shape[0] else 0
            aout[p, k] = tgt[k] if k < tgt.shape[0] else 0
        alen[p] = n
        _add(counts, stats, ain[p], aout[p], n)
    for _ in range(iterations):
        for p in range(n_pairs):
            _remove(counts, stats, ain[p], aout[p], alen[p], compat)
            alen[p] = _align_pair(ins[in_off[p]:in_off[p + 1]], outs[out_off[p]:out_off[p + 1]],
                                  counts, stats, prior, trellis, back, True, compat, rng,
                                  ain[p], aout[p])
            _add(counts, stats, ain[p], aout[p], alen[p])
    for p in range(n_pairs):   # final: minimum-cost path under the final counts
        alen[p] = _align_pair(ins[in_off[p]:in_off[p + 1]], outs[out_off[p]:out_off[p + 1]],
                              counts, stats, prior, trellis, back, False, compat, rng,
                              ain[p], aout[p])


class CrpAligner:
    """Aligns lists of (lemma, form) pairs; one object holds the random stream (and,
    with ``compat``, the reference's carried-over count table and back-pointers)."""

    def __init__(self, config: AlignerConfig = AlignerConfig(), seed: int = 0):
        config.validate()
        self.config = config
        state = _DRAND48_DEFAULT if config.compat else ((int(seed) << 16) | 0x330E) & _MASK48
        self._rng = np.array([state], dtype=np.uint64)
        self._symbols: dict[str, int] = {}
        self._counts = np.zeros((1, 1), dtype=np.int64)
        self._stats = np.zeros(2, dtype=np.int64)   # N (total count), D (distinct pairs)
        self._back = np.zeros((MAX_LEN + 1, MAX_LEN + 1), dtype=np.int8)

    def _encode(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        ids = []
        offsets = [0]
        for word in words:
            clusters = graphemes(word)
            if len(clusters) > MAX_LEN:
                raise UserError(f"aligner: word of {len(clusters)} characters (max {MAX_LEN}): "
                                f"{word[:40]}...")
            for ch in clusters:
                ids.append(self._symbols.setdefault(ch, len(self._symbols) + 1))
            offsets.append(len(ids))
        return np.array(ids, dtype=np.int64), np.array(offsets, dtype=np.int64)

    def align(self, pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The aligned (lemma, form) strings of each pair, epsilon = ' ' (ambiguous where a
        word holds a space: ``align_clusters`` is exact)."""
        return [("".join(c or EPSILON for c in a), "".join(c or EPSILON for c in b))
                for a, b in self.align_clusters(pairs)]

    def align_clusters(self, pairs: list[tuple[str, str]]
                       ) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
        """The aligned (lemma, form) grapheme clusters of each pair, of equal length, with
        ``""`` for epsilon: joining one side gives its word back exactly."""
        if not pairs:
            return []
        ins, in_off = self._encode([p[0] for p in pairs])
        outs, out_off = self._encode([p[1] for p in pairs])
        size = len(self._symbols) + 1
        if self.config.compat and self._counts.shape[0] >= size:
            counts = self._counts
        else:
            counts = np.zeros((size, size), dtype=np.int64)
            if self.config.compat:   # carry the old table over
                old = self._counts.shape[0]
                counts[:old, :old] = self._counts
        if not self.config.compat:
            self._stats[:] = 0
        width = max(len(a) + len(b) for a, b in pairs) + 1
        ain = np.zeros((len(pairs), width), dtype=np.int64)
        aout = np.zeros((len(pairs), width), dtype=np.int64)
        alen = np.zeros(len(pairs), dtype=np.int64)
        _crp_align(ins, in_off, outs, out_off, counts, self._stats, float(self.config.prior),
                   int(self.config.iterations), bool(self.config.compat), self._rng,
                   self._back, ain, aout, alen)
        if self.config.compat:
            self._counts = counts
        chars = np.array([""] + list(self._symbols), dtype=object)
        return [(tuple(chars[ain[p, :alen[p]]]), tuple(chars[aout[p, :alen[p]]]))
                for p in range(len(pairs))]
