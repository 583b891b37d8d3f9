"""GECA (Andreas 2020, "Good-Enough Compositional Data Augmentation") on Polars/numpy.

Library entry point::

    from compgen.augment.geca import geca_augment, load_training, make_config
    config = make_config("lm", {"seed": 0})          # preset + overrides -> GecaConfig
    result = geca_augment(load_training("lm/kin"), config)
    result.table      # Polars table x, y (list[str]), split="geca": the synthesized examples
    result.train      # the training examples used (after hold-out / dedup)
    result.stats      # examples_in, training_examples, templates, fragments, active_templates,
                      # proposals, synthesized, templates_used, fragments_used, seconds, peak_rss_mb
    result.templates  # per synthesized example: the (x, y) template text with WUG0.. holes
    result.fragments  # per synthesized example: the substituted fragment ("span | span")

``augment_file(data, out_tsv, config, concat=False)`` does the same and writes a samples
TSV (for language modelling the x column is empty; ``concat`` puts the training examples
first, as the reference's ``fake_corpus.py --concat`` does).

``train_table`` is an example table (columns ``x`` and ``y``: list[str]); every row is
training data (select the train split first). ``GecaConfig`` holds the options of the
reference implementation with the same meaning (geca-spec.md §2-§8):

* ``wug_limit`` a span is a usable fragment part only if its n-gram count (each side
  counted separately, all occurrences) is <= wug_limit; None = no limit.
* ``wug_size`` max tokens per span; ``wug_count`` max spans per fragment.
* ``variants`` fragments tried per template (None = all candidates, no truncation: the
  output SET is then a deterministic function of the input and the flags).
* ``n_sample`` cap on synthesized examples (None = no cap).
* ``max_comp_len`` examples with len(x) + 1 + len(y) >= max_comp_len give no templates.
* ``dedup`` deduplicate training pairs first; ``output_only`` language modelling (input
  side ignored); ``template_sim`` "none" (environment = whole template) or "window"
  (environment = the windows of ``sim_window_size`` tokens around every hole).
* ``holdout`` SCAN reference split: shuffle with numpy ``RandomState(seed)`` and drop the
  first ``holdout`` examples (the reference's validation set) before anything else.
* ``seed`` seeds a numpy Generator: same seed and input -> identical output.
* ``reference_offsets`` (True in every preset) keeps the reference's start position for
  the third span's search (see the quirks below); False searches from just after the
  second span's occurrence instead (only matters with wug_count 3).

How it works. Tokens are integer-encoded and every example becomes one sequence
``<s> x SEP y </s>`` where SEP (and the wugs) are ids outside the data vocabulary, so a
data token spelled ``##`` or ``WUG0`` cannot collide with them. N-grams, their counts,
and every (example, fragment) instance of the reference's recursive enumeration are
produced with vectorised numpy ops (pairs and triples of spans as per-example cross
products filtered by token bitmasks). Templates are never built as sequences: each is
identified by a 2x64-bit polynomial hash computed piecewise from prefix sums of the
example (so the cost is per replaced occurrence, not per token); only instances whose
cheap O(1) template pre-hash (token multiset, length, text before the first and after the
last hole) collides with another's are hashed exactly, and only templates that can give
(>= 2 fragments) or receive (share a fragment with such a template) are kept. The generation step of
the reference (its quadratic template-template adjacency, spec §5-§6) is done with
joins: the candidate multiset of a template T2 depends only on (fragments of T2, union
of fragments of templates environment-similar to T2) (spec §12), and for a fragment a'
its multiplicity is the number of templates T1 with >= 2 fragments that contain a' and
share a fragment with that union. T1s are grouped by their fragment set, so the work is
over (environment class, fragment-set class) pairs rather than template pairs.
Realized sequences are hashed the same way and checked against the training inputs and
outputs (novelty per side, as in the reference), deduplicated, then only the kept
examples are turned back into tokens (and re-checked exactly).

Differences from the reference, on purpose:
* The window slice ``T[p-w : p+w+1]`` of the reference wraps around when p < w (a
  negative start index); here the window is clamped at the sequence start (a bug fix;
  it cannot trigger in the reference's LM runs).
* The reference's RNG path (shuffles of set-ordered lists) cannot be reproduced; with
  ``variants`` k the k fragments of each template are drawn without replacement from the
  same candidate multiset (duplicates kept, as in the reference) with a numpy Generator,
  and templates are visited in a seeded random order before the ``n_sample`` cap.
* ``max_adjacencies`` is not offered (no effect with template_sim none; see spec §5).

Reproduced quirks: replace-all templating over both sides; second/third spans searched
from position i+1 of the already rewritten sequence (so with wug_count 3 a third span
can be missed after a multi-token second span that also occurs earlier); token-type
disjointness; ``max_comp_len`` with ``>=``; novelty per side; candidates keep one copy
per supplying template.
"""

from __future__ import annotations

import resource
import time
import tomllib
from dataclasses import asdict, dataclass, field, fields
from importlib import resources

import numpy as np
import polars as pl

from compgen.errors import UserError

PRESETS = ("scan", "lm", "lm-na", "semparse")
SPLIT_NAME = "geca"
U64 = np.uint64


# ---------------------------------------------------------------------------- config

@dataclass
class GecaConfig:
    wug_limit: int | None = None
    wug_size: int = 4
    wug_count: int = 2
    variants: int | None = 2
    n_sample: int | None = 1000
    max_comp_len: int | None = None
    dedup: bool = False
    output_only: bool = False
    template_sim: str = "none"
    sim_window_size: int = 2
    holdout: int = 0
    seed: int = 0
    reference_offsets: bool = True

    def validate(self) -> None:
        def need(ok: bool, msg: str) -> None:
            if not ok:
                raise UserError(msg)
        need(self.wug_size >= 1, f"--wug-size must be >= 1 (got {self.wug_size})")
        need(self.wug_size <= 8, f"--wug-size must be <= 8 (got {self.wug_size})")
        need(1 <= self.wug_count <= 3, f"--wug-count must be 1, 2 or 3 (got {self.wug_count})")
        need(self.wug_limit is None or self.wug_limit >= 1,
             f"--wug-limit must be >= 1 (got {self.wug_limit})")
        need(self.variants is None or self.variants >= 1,
             f"--variants must be >= 1 or 'all' (got {self.variants})")
        need(self.n_sample is None or self.n_sample >= 1,
             f"--n-sample must be >= 1 (got {self.n_sample})")
        need(self.max_comp_len is None or self.max_comp_len >= 1,
             f"--max-comp-len must be >= 1 (got {self.max_comp_len})")
        need(self.template_sim in ("none", "window"),
             f"--template-sim must be 'none' or 'window' (got {self.template_sim!r})")
        need(0 <= self.sim_window_size <= 16,
             f"--sim-window-size must be between 0 and 16 (got {self.sim_window_size})")
        need(self.holdout >= 0, f"--holdout must be >= 0 (got {self.holdout})")
        need(self.seed >= 0, f"--seed must be >= 0 (got {self.seed})")


def load_preset(name: str) -> dict:
    """Option values of a preset (``compgen/configs/geca_<name>.toml``) as a dict."""
    if name not in PRESETS:
        raise UserError(f"unknown GECA preset '{name}' (valid: {', '.join(PRESETS)})")
    text = resources.files("compgen").joinpath(
        "configs", f"geca_{name.replace('-', '_')}.toml").read_text()
    values = tomllib.loads(text)
    known = {f.name for f in fields(GecaConfig)}
    for key, value in list(values.items()):
        if key not in known:
            raise UserError(f"preset {name}: unknown option '{key}'")
        if value == "all" or value == "none" and key != "template_sim":
            values[key] = None
    return values


@dataclass
class GecaResult:
    table: pl.DataFrame                       # synthesized examples: x, y, split="geca"
    stats: dict = field(default_factory=dict)
    templates: list[tuple[str, str]] = field(default_factory=list)  # per example: (x, y) template text
    fragments: list[str] = field(default_factory=list)              # per example: substituted fragment
    train: pl.DataFrame | None = None         # the training examples used (after holdout/dedup)


# ---------------------------------------------------------------------------- hashing

def _mix(x: np.ndarray) -> np.ndarray:
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


class _Hasher:
    def __init__(self, flat, n_ids, max_len):
        self.h = [_PolyHash(flat, n_ids, max_len, seed) for seed in (0x5EED1, 0x5EED2)]

    def span(self, start, length):
        a, b = (h.span(start, length) for h in self.h)
        return a, b

    def rewrites(self, lo, hi, row_inst, row_pos, row_len, row_hash, row_rlen):
        """row_hash: pair (h1 values, h2 values). Returns one folded 64-bit key."""
        a = self.h[0].rewrites(lo, hi, row_inst, row_pos, row_len, row_hash[0], row_rlen)
        b = self.h[1].rewrites(lo, hi, row_inst, row_pos, row_len, row_hash[1], row_rlen)
        return a ^ _mix(b)


# ---------------------------------------------------------------------------- helpers

def _segments(sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For groups of the given sizes: (group index of each element, index within group)."""
    sizes = sizes.astype(np.int64)
    group = np.repeat(np.arange(len(sizes)), sizes)
    starts = np.cumsum(sizes) - sizes
    within = np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(starts, sizes)
    return group, within


def _cross_chunks(unit_lo: np.ndarray, unit_m: np.ndarray, left: np.ndarray, chunk: int = 4_000_000):
    """Yield (left row, unit) for every left row x every unit of its example, in chunks of
    about ``chunk`` rows. ``unit_lo``/``unit_m``: per left row, the first unit and the unit
    count of its example."""
    sizes = unit_m.astype(np.int64)
    cum = np.cumsum(sizes)
    begin = 0
    while begin < len(left):
        base = cum[begin - 1] if begin else 0
        end = max(int(np.searchsorted(cum, base + chunk, side="right")), begin + 1)
        g, w = _segments(sizes[begin:end])
        yield left[begin:end][g], unit_lo[begin:end][g] + w
        begin = end


def _unique(keys: np.ndarray):
    """(sorted distinct keys, index of the first occurrence of each, inverse), like
    ``np.unique(..., return_index=True, return_inverse=True)`` but with a stable radix
    argsort (much faster on integer keys)."""
    order = np.argsort(keys, kind="stable")
    sk = keys[order]
    new = np.ones(len(sk), bool)
    new[1:] = sk[1:] != sk[:-1]
    inv = np.empty(len(keys), np.int64)
    inv[order] = np.cumsum(new) - 1
    return sk[new], order[new], inv


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reference_holdout(table: pl.DataFrame, holdout: int, seed: int) -> pl.DataFrame:
    """The reference SCAN loader's validation hold-out: ``np.random.seed(seed);
    np.random.shuffle(train)`` on the list of examples, then drop the first ``holdout``."""
    if holdout <= 0:
        return table
    if holdout >= table.height:
        raise UserError(f"--holdout {holdout} leaves no training examples ({table.height} in data)")
    order = list(range(table.height))
    np.random.RandomState(seed).shuffle(order)
    return table[order[holdout:]]


# ---------------------------------------------------------------------------- extraction

@dataclass
class _Corpus:
    vocab: list[str]
    flat: np.ndarray         # int32 ids of <s> x SEP y </s> for every example, concatenated
    off: np.ndarray          # start of each example in flat (len E+1)
    nx: np.ndarray           # input length of each example
    eligible: np.ndarray     # bool: example gives templates (max_comp_len)
    sep: int
    bos: int
    eos: int
    wug0: int


def _encode(table: pl.DataFrame, cfg: GecaConfig) -> _Corpus:
    xs, ys = table["x"], table["y"]
    x_tok = xs.list.explode(keep_nulls=False, empty_as_null=False).rename("t")
    y_tok = ys.list.explode(keep_nulls=False, empty_as_null=False).rename("t")
    tokens = pl.concat([x_tok, y_tok])
    vocab = tokens.unique(maintain_order=True).to_list()
    enum = pl.Enum(vocab)
    v = len(vocab)
    sep, bos, eos, wug0 = v, v + 1, v + 2, v + 3
    nx = xs.list.len().to_numpy().astype(np.int64)
    ny = ys.list.len().to_numpy().astype(np.int64)
    n = nx + ny + 3
    off = np.zeros(len(n) + 1, np.int64)
    off[1:] = np.cumsum(n)
    flat = np.empty(int(off[-1]), np.int32)
    flat[off[:-1]] = bos
    flat[off[:-1] + nx + 1] = sep
    flat[off[1:] - 1] = eos
    xid = x_tok.cast(enum).to_physical().to_numpy()
    yid = y_tok.cast(enum).to_physical().to_numpy()
    ex, w = _segments(nx)
    flat[off[:-1][ex] + 1 + w] = xid
    ex, w = _segments(ny)
    flat[off[:-1][ex] + nx[ex] + 2 + w] = yid
    eligible = np.ones(len(n), bool)
    if cfg.max_comp_len is not None:
        eligible = (nx + 1 + ny) < cfg.max_comp_len
    return _Corpus(vocab, flat, off, nx, eligible, sep, bos, eos, wug0)


@dataclass
class _Units:
    """Distinct (example, kept n-gram) pairs and their occurrences."""
    ex: np.ndarray
    gram: np.ndarray
    length: np.ndarray
    first: np.ndarray        # global position of first occurrence
    last: np.ndarray         # global position of last occurrence
    occ_pos: np.ndarray      # all occurrences, sorted by (unit, pos)
    occ_start: np.ndarray    # per unit, into occ_pos (len U+1)
    rep_pos: np.ndarray      # replaced (left-to-right non-overlapping) occurrences
    rep_start: np.ndarray
    mask: np.ndarray         # (U, words) uint64 bitmask of the unit's token types
    ex_lo: np.ndarray        # per example: first unit index (len E+1)


def _grams(c: _Corpus, cfg: GecaConfig):
    """Gram id of every (position, length) window that holds only data tokens, the gram
    table (length, a representative position) and the keep mask (wug_limit)."""
    flat = c.flat
    is_tok = flat < c.sep
    ids_by_len, pos_by_len = [], []
    gram_len, gram_rep = [], []
    n_grams = 0
    prev_id = None
    valid = is_tok.copy()
    for length in range(1, cfg.wug_size + 1):
        if length > 1:
            valid = valid[:-1] & is_tok[length - 1:]
        pos = np.flatnonzero(valid)
        if len(pos) == 0:
            break
        if length == 1:
            key = flat[pos].astype(np.int64)
        else:
            # prev_id is indexed by position (dense array over positions of length-1 windows)
            key = prev_id[pos].astype(np.int64) * (c.sep + 1) + flat[pos + length - 1]
        uniq, first_idx, inv = _unique(key)
        gid = inv.astype(np.int64) + n_grams
        dense = np.full(len(flat), -1, np.int64)
        dense[pos] = inv
        prev_id = dense
        ids_by_len.append(gid)
        pos_by_len.append(pos)
        gram_len.append(np.full(len(uniq), length, np.int32))
        gram_rep.append(pos[first_idx])
        n_grams += len(uniq)
    gram_len = np.concatenate(gram_len)
    gram_rep = np.concatenate(gram_rep)
    gids = np.concatenate(ids_by_len)
    gpos = np.concatenate(pos_by_len)
    counts = np.bincount(gids, minlength=n_grams)
    keep = np.ones(n_grams, bool) if cfg.wug_limit is None else counts <= cfg.wug_limit
    return gids, gpos, gram_len, gram_rep, keep


def _units(c: _Corpus, gids, gpos, gram_len, keep) -> _Units:
    n_ex = len(c.off) - 1
    ex_of = np.searchsorted(c.off, gpos, side="right") - 1
    sel = keep[gids] & c.eligible[ex_of]
    gids, gpos, ex_of = gids[sel], gpos[sel], ex_of[sel]
    order = np.argsort(gpos, kind="stable")
    order = order[np.argsort((ex_of * len(gram_len) + gids)[order], kind="stable")]
    gids, gpos, ex_of = gids[order], gpos[order], ex_of[order]
    new = np.ones(len(gids), bool)
    new[1:] = (gids[1:] != gids[:-1]) | (ex_of[1:] != ex_of[:-1])
    starts = np.flatnonzero(new)
    occ_start = np.append(starts, len(gids))
    u_ex, u_gram = ex_of[starts], gids[starts]
    u_len = gram_len[u_gram]
    u_first = gpos[starts]
    u_last = gpos[occ_start[1:] - 1]
    unit_of = np.cumsum(new) - 1
    # replace-all takes occurrences left to right without overlap
    rep = np.ones(len(gids), bool)
    clash = np.zeros(len(gids), bool)
    clash[1:] = (~new[1:]) & (gpos[1:] - gpos[:-1] < u_len[unit_of[1:]])
    for u in np.unique(unit_of[clash]):          # self-overlapping n-grams only (rare)
        end = -1
        for j in range(occ_start[u], occ_start[u + 1]):
            rep[j] = gpos[j] >= end
            if rep[j]:
                end = gpos[j] + u_len[u]
    rep_pos = gpos[rep]
    rep_count = np.bincount(unit_of[rep], minlength=len(starts))
    rep_start = np.concatenate([[0], np.cumsum(rep_count)])
    # per-example local token index -> bitmask of token types of each unit
    ex_all = np.repeat(np.arange(n_ex), np.diff(c.off))
    key = ex_all * (c.wug0 + 1) + c.flat
    uk, _, inv = _unique(key)
    ex_first = np.searchsorted(uk, np.arange(n_ex) * (c.wug0 + 1))
    local = inv - ex_first[ex_all]
    words = max(1, int(local.max()) // 64 + 1) if len(local) else 1
    mask = np.zeros((len(starts), words), U64)
    for i in range(int(u_len.max()) if len(u_len) else 0):
        has = u_len > i
        loc = local[u_first[has] + i]
        for w in range(words):
            bits = np.where(loc // 64 == w, U64(1) << (loc % 64).astype(U64), U64(0))
            mask[has, w] |= bits
    ex_lo = np.searchsorted(u_ex, np.arange(n_ex + 1))
    return _Units(u_ex, u_gram, u_len, u_first, u_last, gpos, occ_start, rep_pos, rep_start,
                  mask, ex_lo)


def _disjoint(mask: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    both = mask[a] & mask[b]
    return both == 0 if both.ndim == 1 else ~np.any(both, axis=1)


def _count_before(u: _Units, rep_key: np.ndarray, unit: np.ndarray, x: np.ndarray, tl: int):
    """Number of replaced occurrences of ``unit`` starting before global position x
    (binary search only for the units that have several)."""
    first = u.rep_pos[u.rep_start[unit]]
    count = (first < x).astype(np.int64)
    multi = np.flatnonzero(u.rep_start[unit + 1] - u.rep_start[unit] > 1)
    if len(multi):
        um = unit[multi]
        count[multi] = np.searchsorted(rep_key, um * tl + x[multi], side="left") - u.rep_start[um]
    return count


def _instances(c: _Corpus, u: _Units, cfg: GecaConfig) -> np.ndarray:
    """Every (example, fragment) the reference's recursive enumeration emits, as an
    (N, 3) array of unit indices (-1 = no span): 1-span, then 2-span, then 3-span."""
    n_units = len(u.ex)
    none = -np.ones(n_units, np.int64)
    out = [np.stack([np.arange(n_units), none, none], 1)]
    if cfg.wug_count < 2 or n_units == 0:
        return out[0]
    m = np.diff(u.ex_lo)
    mask = u.mask[:, 0] if u.mask.shape[1] == 1 else u.mask
    pairs_a, pairs_b = [], []
    for a, b in _cross_chunks(u.ex_lo[u.ex], m[u.ex], np.arange(n_units)):
        ok = u.last[b] > u.first[a]       # b found by the scan that starts after a
        a, b = a[ok], b[ok]
        ok = _disjoint(mask, a, b)        # spans share no token type
        pairs_a.append(a[ok])
        pairs_b.append(b[ok])
    pa, pb = np.concatenate(pairs_a), np.concatenate(pairs_b)
    out.append(np.stack([pa, pb, -np.ones(len(pa), np.int64)], 1))
    if cfg.wug_count >= 3 and len(pa):
        tl = len(c.flat) + 1
        occ_key = np.repeat(np.arange(n_units), np.diff(u.occ_start)) * tl + u.occ_pos
        rep_key = np.repeat(np.arange(n_units), np.diff(u.rep_start)) * tl + u.rep_pos
        # first occurrence q0 of b after the first a (where the depth-1 scan found b) and
        # its position j0 in the once-rewritten sequence: the depth-2 scan starts at j0+1
        # of the twice-rewritten sequence (reference quirk, reproduced)
        q0 = u.occ_pos[np.searchsorted(occ_key, pb * tl + u.first[pa], side="right")]
        j0 = q0 - (u.length[pa] - 1) * _count_before(u, rep_key, pa, q0, tl)
        mab = mask[pa] | mask[pb]
        tri = []
        for p, cc in _cross_chunks(u.ex_lo[u.ex[pa]], m[u.ex[pa]], np.arange(len(pa))):
            r = u.last[cc]
            ok = r > j0[p]                 # necessary: the rewritten position is <= r
            p, cc, r = p[ok], cc[ok], r[ok]
            both = mask[cc] & mab[p]
            ok = both == 0 if both.ndim == 1 else ~np.any(both, axis=1)
            p, cc, r = p[ok], cc[ok], r[ok]
            a, b = pa[p], pb[p]
            pos2 = (r - (u.length[a] - 1) * _count_before(u, rep_key, a, r, tl)
                    - (u.length[b] - 1) * _count_before(u, rep_key, b, r, tl))
            ok = pos2 >= j0[p] + 1 if cfg.reference_offsets else r > q0[p]
            tri.append(np.stack([a[ok], b[ok], cc[ok]], 1))
        out.append(np.concatenate(tri))
    return np.concatenate(out)


def _rep_rows(u: _Units, inst_units: np.ndarray):
    """Replaced occurrences of every instance's spans, sorted by (instance, position):
    (row instance, global position, length, span index k)."""
    insts, ks, poss = [], [], []
    for k in range(inst_units.shape[1]):
        uk = inst_units[:, k]
        has = uk >= 0
        cnt = np.where(has, u.rep_start[np.maximum(uk, 0) + 1] - u.rep_start[np.maximum(uk, 0)], 0)
        g, w = _segments(cnt)
        insts.append(g)
        ks.append(np.full(len(g), k, np.int64))
        poss.append(u.rep_pos[u.rep_start[uk[g]] + w])
    inst = np.concatenate(insts)
    pos = np.concatenate(poss)
    k = np.concatenate(ks)
    order = np.argsort(inst * (int(pos.max(initial=0)) + 1) + pos, kind="stable")
    inst, pos, k = inst[order], pos[order], k[order]
    length = u.length[inst_units[inst, k]]
    return inst, pos, length, k


def _template_keys(c: _Corpus, u: _Units, hasher: _Hasher, inst_units: np.ndarray,
                   chunk: int = 1_500_000) -> np.ndarray:
    keys = np.empty(len(inst_units), U64)
    wug_h = [h.hv[c.wug0: c.wug0 + 3] for h in hasher.h]
    for begin in range(0, len(inst_units), chunk):
        part = inst_units[begin: begin + chunk]
        ex = u.ex[part[:, 0]]
        lo, hi = c.off[ex], c.off[ex + 1]
        inst, pos, length, k = _rep_rows(u, part)
        rh = (wug_h[0][k], wug_h[1][k])
        keys[begin: begin + chunk] = hasher.rewrites(lo, hi, inst, pos, length, rh,
                                                     np.ones(len(inst), np.int64))
    return keys


def _prehash(c: _Corpus, u: _Units, hasher: _Hasher, inst_units: np.ndarray) -> np.ndarray:
    """A cheap necessary condition for two instances to have the same template, O(1) per
    instance: hashes of the template's token multiset, its length, the tokens before its
    first hole and those after its last hole."""
    tok = _mix(np.arange(c.wug0 + 8, dtype=U64) * U64(0x2545F4914F6CDD1D))
    pref = np.concatenate([np.zeros(1, U64), np.cumsum(tok[c.flat], dtype=U64)])
    total = pref[c.off[1:]] - pref[c.off[:-1]]
    n_rep = (u.rep_start[1:] - u.rep_start[:-1]).astype(np.int64)
    gram_sum = pref[u.first + u.length] - pref[u.first]
    last_end = u.rep_pos[u.rep_start[1:] - 1] + u.length
    ex = u.ex[inst_units[:, 0]]
    h = total[ex]
    length = (c.off[ex + 1] - c.off[ex]).astype(np.int64)
    begin = np.full(len(ex), np.iinfo(np.int64).max)
    end = np.zeros(len(ex), np.int64)
    for k in range(inst_units.shape[1]):
        # per-unit values with a trailing neutral entry, picked by index -1 (no span)
        delta = np.append(n_rep.astype(U64) * (tok[c.wug0 + k] - gram_sum), U64(0))
        shrink = np.append(n_rep * (u.length - 1), 0)
        first = np.append(u.first, np.iinfo(np.int64).max)
        stop = np.append(last_end, 0)
        uk = inst_units[:, k]
        h = h + delta[uk]
        length -= shrink[uk]
        np.minimum(begin, first[uk], out=begin)
        np.maximum(end, stop[uk], out=end)
    poly = hasher.h[0]
    head = poly.span(c.off[ex], begin - c.off[ex])
    tail = poly.span(end, c.off[ex + 1] - end)
    return h ^ _mix(length.astype(U64)) ^ _mix(head ^ U64(0x51)) * U64(3) ^ _mix(tail)


def _template_ids(c, u, hasher, inst, fkey, keep_all: bool):
    """Template id of every instance, the number of distinct templates, and which
    instances matter for generation.

    Exact (hashed) templates are computed only for instances whose cheap multiset hash is
    shared with another instance; an instance with a unique one has a template of its own
    (so with a single fragment). A template matters if it has >= 2 fragments (it can
    supply candidates) or, with template_sim none, if one of its fragments is in such a
    template (it can receive them). With window similarity every template is kept."""
    n = len(inst)
    if keep_all:
        shared = np.ones(n, bool)
    else:
        _, _, pinv = _unique(_prehash(c, u, hasher, inst))
        shared = np.bincount(pinv)[pinv] > 1
    tkey = _template_keys(c, u, hasher, inst[shared])
    _, _, tid_shared = _unique(tkey)
    n_shared = int(tid_shared.max(initial=-1)) + 1
    inst_t = np.empty(n, np.int64)
    inst_t[shared] = tid_shared
    inst_t[~shared] = n_shared + np.arange(int((~shared).sum()))
    n_t = n_shared + int((~shared).sum())
    if keep_all:
        return inst_t, n_t, np.ones(n, bool)
    idx = np.flatnonzero(shared)
    pairs = _unique(tid_shared * (int(fkey.max()) + 1) + fkey[idx])[1]   # distinct (t, f)
    mult = np.bincount(tid_shared[pairs], minlength=n_shared)
    donors = np.unique(fkey[idx[pairs][mult[tid_shared[pairs]] > 1]])
    receiving = np.isin(fkey, donors)
    t_recv = np.zeros(n_t, bool)
    t_recv[inst_t[receiving]] = True
    keep = t_recv[inst_t] | (shared & (np.concatenate([mult, np.zeros(n_t - n_shared, np.int64)])[inst_t] > 1))
    return inst_t, n_t, keep


# ---------------------------------------------------------------------------- generation

def _set_hash(group_sorted: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """Order-free hash of the set of values of each group (rows sorted by group, distinct)."""
    h = np.zeros(n_groups, U64)
    if len(values):
        starts = np.flatnonzero(np.r_[True, group_sorted[1:] != group_sorted[:-1]])
        h[group_sorted[starts]] = np.add.reduceat(_mix(values.astype(U64) + U64(7)), starts)
    return h


def _window_classes(c: _Corpus, u: _Units, hasher: _Hasher, rep_units: np.ndarray, w: int,
                    chunk: int = 5_000) -> np.ndarray:
    """Environment class of each template for template_sim window: templates are similar
    iff the windows T[p-w : p+w+1] around all their wug positions p (in order) are equal.
    The window is clamped at the start (the reference's slice wraps around there).
    Templates are rebuilt as padded token matrices, a chunk of templates at a time."""
    sig = np.zeros(len(rep_units), U64)
    for begin in range(0, len(rep_units), chunk):
        sig[begin: begin + chunk] = _window_signatures(c, u, hasher, rep_units[begin: begin + chunk], w)
    return _unique(sig)[2]


def _window_signatures(c, u, hasher, rep_units, w):
    n_t = len(rep_units)
    ex = u.ex[rep_units[:, 0]]
    n = (c.off[ex + 1] - c.off[ex]).astype(np.int64)
    width = int(n.max())
    pad, dele = -1, -2
    mat = np.full((n_t, width), pad, np.int32)
    r, col = _segments(n)
    mat[r, col] = c.flat[c.off[ex][r] + col]
    inst, pos, length, k = _rep_rows(u, rep_units)
    loc = pos - c.off[ex[inst]]
    mat[inst, loc] = c.wug0 + k
    g, within = _segments(length - 1)
    mat[inst[g], loc[g] + 1 + within] = dele
    keep = mat >= 0
    newcol = np.cumsum(keep, axis=1, dtype=np.int32) - 1
    tm = np.full((n_t, width), pad, np.int32)
    rows = np.broadcast_to(np.arange(n_t, dtype=np.int32)[:, None], mat.shape)
    tm[rows[keep], newcol[keep]] = mat[keep]
    tlen = keep.sum(1)
    wr, wp = np.nonzero(tm >= c.wug0)
    offs = np.arange(-w, w + 1)
    cols = wp[:, None] + offs[None, :]
    inside = (cols >= 0) & (cols < tlen[wr][:, None])
    win = np.where(inside, tm[wr[:, None], np.clip(cols, 0, width - 1)], c.wug0 + 4)
    # hash each template's sequence of windows (ordered by position)
    flat_tok = win.reshape(-1)
    row_t = np.repeat(wr, 2 * w + 1)
    t_start = np.searchsorted(row_t, np.arange(n_t))
    e = np.arange(len(flat_tok)) - t_start[row_t]
    st = np.flatnonzero(np.r_[True, row_t[1:] != row_t[:-1]])
    sig = np.zeros(n_t, U64)
    for h in hasher.h:
        s = np.zeros(n_t, U64)
        s[row_t[st]] = np.add.reduceat(h.hv[flat_tok] * h.bp[e], st)
        sig = sig * U64(0x9E3779B97F4A7C15) ^ _mix(s)
    return sig


def _candidates(ta_t, ta_f, n_t, env_class, frag_grams, cfg) -> pl.DataFrame:
    """Candidate multiset of every template class key: rows (key, frag, count) and the
    template -> key map. key = (environment fragment set, own fragment set)."""
    mult = np.bincount(ta_t, minlength=n_t)
    own_hash = _set_hash(ta_t, ta_f, n_t)
    _, own_first, own = _unique(own_hash)
    ta = pl.DataFrame({"t": ta_t, "f": ta_f})
    own_of = pl.DataFrame({"t": np.arange(n_t), "own": own, "mult": mult})
    own_members = (pl.DataFrame({"t": own_first, "own": np.arange(len(own_first))})
                   .join(ta, on="t").select("own", "f"))
    # T1 side: fragment-set classes with >= 2 fragments, weighted by their template count
    a_weight = (own_of.filter(pl.col("mult") > 1).group_by("own").agg(pl.len().alias("w"))
                .rename({"own": "A"}))
    a_members = own_members.rename({"own": "A"}).join(a_weight, on="A")
    # T2 side: environment = own fragments (none) or those of the window class (window)
    if env_class is None:
        env_of = own_of.select("t", pl.col("own").alias("E"))
        e_members = own_members.rename({"own": "E"})
    else:
        tw = pl.DataFrame({"t": np.arange(n_t), "win": env_class})
        win_members = ta.join(tw, on="t").select("win", "f").unique()
        wm = win_members.sort("win", "f")
        wn = int(env_class.max()) + 1
        e_hash = _set_hash(wm["win"].to_numpy(), wm["f"].to_numpy(), wn)
        _, e_first, e_of_win = _unique(e_hash)
        env_of = pl.DataFrame({"t": np.arange(n_t), "E": e_of_win[env_class]})
        e_members = (pl.DataFrame({"win": e_first, "E": np.arange(len(e_first))})
                     .join(win_members, on="win").select("E", "f"))
    pairs = e_members.join(a_members.select("A", "f"), on="f").select("E", "A").unique()
    counts = (pairs.join(a_members, on="A").group_by("E", "f")
              .agg(pl.col("w").sum().alias("c")))
    t_key = env_of.join(own_of.select("t", "own"), on="t")
    keys = t_key.select("E", "own").unique().sort("E", "own").with_row_index("key")
    t_key = t_key.join(keys, on=["E", "own"]).select("t", "key").sort("t")
    cand = keys.join(counts, on="E")
    # overlap(a', own): a' is one of own, or shares an identical span with every one of own
    g = pl.DataFrame({"f": np.arange(len(frag_grams)), "g0": frag_grams[:, 0],
                      "g1": frag_grams[:, 1], "g2": frag_grams[:, 2]})
    chk = (cand.select("key", "own", "f").join(own_members.rename({"f": "b"}), on="own")
           .join(g, on="f").join(g.rename({"f": "b", "g0": "h0", "g1": "h1", "g2": "h2"}), on="b"))
    share = pl.lit(False)
    for i in range(3):
        for j in range(3):
            share = share | ((pl.col(f"g{i}") == pl.col(f"h{j}")) & (pl.col(f"g{i}") >= 0))
    bad = (chk.group_by("key", "f")
           .agg(((pl.col("f") == pl.col("b")).any() | share.all()).alias("overlap"))
           .filter(pl.col("overlap")).select("key", "f"))
    cand = cand.join(bad, on=["key", "f"], how="anti").select("key", "f", "c").sort("key", "f")
    return cand, t_key


def _draw(cand: pl.DataFrame, t_key: pl.DataFrame, ok_t: np.ndarray, n_keys: int,
          variants: int | None, rng: np.random.Generator):
    """(template, fragment, order) rows: for each template (visited in a seeded random
    order) `variants` draws without replacement from its key's candidate multiset, or
    every candidate once when variants is None."""
    ck = cand["key"].to_numpy()
    cf = cand["f"].to_numpy()
    cc = cand["c"].to_numpy().astype(np.int64)
    k_start = np.searchsorted(ck, np.arange(n_keys + 1))
    t_all = t_key["t"].to_numpy()
    key_all = t_key["key"].to_numpy()
    n_cand = k_start[key_all + 1] - k_start[key_all]
    sel = ok_t[t_all] & (n_cand > 0)
    t, key = t_all[sel], key_all[sel]
    rank = np.empty(len(t), np.int64)
    rank[rng.permutation(len(t))] = np.arange(len(t))
    if variants is None:
        cnt = k_start[key + 1] - k_start[key]
        g, w = _segments(cnt)
        rows_t, rows_f = t[g], cf[k_start[key][g] + w]
        order = rank[g] * (int(cnt.max(initial=0)) + 1) + w
    else:
        cum = np.cumsum(cc)
        base = np.concatenate([[0], cum])
        lo = k_start[key]
        total = base[k_start[key + 1]] - base[lo]
        drawn = []
        rows_t, rows_f, order = [], [], []
        for r in range(variants):
            live = total - r > 0
            u_ = np.floor(rng.random(len(t)) * np.maximum(total - r, 1)).astype(np.int64)
            target = base[lo] + u_
            idx = np.searchsorted(cum, target, side="right")
            for _ in range(r + 1):          # skip copies already drawn (fixed point)
                s = np.zeros(len(t), np.int64)
                for d in drawn:
                    s += d <= idx
                idx = np.searchsorted(cum, target + s, side="right")
            drawn.append(np.where(live, idx, -1))
            rows_t.append(t[live])
            rows_f.append(cf[idx[live]])
            order.append(rank[live] * variants + r)
        rows_t, rows_f, order = map(np.concatenate, (rows_t, rows_f, order))
    o = np.argsort(order, kind="stable")
    return rows_t[o], rows_f[o]


# ---------------------------------------------------------------------------- main

def _timer():
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def geca_augment(table: pl.DataFrame, config: GecaConfig | None = None, progress=None) -> GecaResult:
    """Synthesize examples from the training examples in ``table`` (see module doc)."""
    cfg = config or GecaConfig()
    cfg.validate()
    clock = _timer()
    say = progress or (lambda msg: None)
    if table.height == 0:
        raise UserError("no training examples in the data")
    for col in ("x", "y"):
        if col not in table.columns:
            raise UserError(f"the data has no '{col}' column")
    data = table.select("x", "y")
    n_raw = data.height
    data = reference_holdout(data, cfg.holdout, cfg.seed)
    if cfg.dedup:
        data = data.unique(maintain_order=True)
    stats = {"examples_in": n_raw, "training_examples": data.height}

    c = _encode(data, cfg)
    gids, gpos, gram_len, gram_rep, keep = _grams(c, cfg)
    stats["kept_ngrams"] = int(keep.sum())
    u = _units(c, gids, gpos, gram_len, keep)
    del gids, gpos
    inst = _instances(c, u, cfg)
    stats["instances"] = len(inst)
    say(f"{len(inst):,} (example, fragment) instances")
    max_len = int(np.diff(c.off).max()) * cfg.wug_size + 2
    hasher = _Hasher(c.flat, c.wug0 + 8, max_len)

    if len(inst) == 0:
        return _empty_result(stats, clock, data)
    # a fragment is the tuple of its spans' gram ids, packed into one integer key
    frag_g = np.where(inst >= 0, u.gram[np.maximum(inst, 0)], -1)
    bits = max(1, int(len(gram_len) + 1).bit_length())
    if bits * 3 <= 63:
        fkey = ((frag_g[:, 0] + 1) << (2 * bits)) | ((frag_g[:, 1] + 1) << bits) | (frag_g[:, 2] + 1)
    else:
        df = pl.DataFrame({"a": frag_g[:, 0], "b": frag_g[:, 1], "c": frag_g[:, 2]})
        fkey = df.select(pl.struct("a", "b", "c").rank("dense")).to_series().to_numpy().astype(np.int64)
    del frag_g
    stats["fragments"] = pl.Series(fkey).n_unique()

    inst_t, n_t, keep_inst = _template_ids(c, u, hasher, inst, fkey, cfg.template_sim == "window")
    stats["templates"] = n_t
    say(f"{n_t:,} templates, {stats['fragments']:,} fragments ({clock():.1f}s)")
    # only templates that can take part in a substitution stay (see _template_ids)
    inst, fkey, inst_t = inst[keep_inst], fkey[keep_inst], inst_t[keep_inst]
    _, t_first, inst_t = _unique(inst_t)
    _, f_first, inst_f = _unique(fkey)
    frag_grams = np.where(inst[f_first] >= 0, u.gram[np.maximum(inst[f_first], 0)], -1)
    n_t, n_f = len(t_first), len(f_first)
    pair = _unique(inst_t.astype(np.int64) * n_f + inst_f)[0]
    ta_t, ta_f = pair // n_f, pair % n_f
    del pair
    stats.update(active_templates=n_t, active_fragments=n_f, template_fragment_pairs=len(ta_t))
    say(f"{n_t:,} templates and {n_f:,} fragments can take part ({clock():.1f}s)")

    rep_units = inst[t_first]
    t_ex = u.ex[rep_units[:, 0]]
    sep_pos = c.off[t_ex] + c.nx[t_ex] + 1
    valid = rep_units >= 0
    uu = np.maximum(rep_units, 0)
    has_in = np.any(valid & (u.first[uu] < sep_pos[:, None]), axis=1)
    has_out = np.any(valid & (u.last[uu] > sep_pos[:, None]), axis=1)
    ok_t = has_out & (has_in | cfg.output_only)
    env = None
    if cfg.template_sim == "window":
        env = _window_classes(c, u, hasher, rep_units, cfg.sim_window_size)
    del inst
    cand, t_key = _candidates(ta_t, ta_f, n_t, env, frag_grams, cfg)
    n_keys = int(t_key["key"].max()) + 1 if t_key.height else 0
    rng = np.random.default_rng(cfg.seed)
    rows_t, rows_f = _draw(cand, t_key, ok_t, n_keys, cfg.variants, rng)
    stats["proposals"] = len(rows_t)
    say(f"{len(rows_t):,} proposals ({clock():.1f}s)")
    # a fragment fills a template only if its span count equals the template's wug count
    n_spans_t = valid.sum(1)
    n_spans_f = (frag_grams >= 0).sum(1)
    same = n_spans_t[rows_t] == n_spans_f[rows_f]
    rows_t, rows_f = rows_t[same], rows_f[same]

    chosen_t, chosen_f = _realize_and_filter(c, u, hasher, data, rep_units, frag_grams,
                                             gram_len, gram_rep, rows_t, rows_f, cfg)
    xs, ys, tx, fx = _materialize(c, u, rep_units, frag_grams, gram_len, gram_rep,
                                  chosen_t, chosen_f)
    # exact re-check of what the hashes decided (novelty per side, no duplicates)
    train_x = set(map(tuple, data["x"].to_list()))
    train_y = set(map(tuple, data["y"].to_list()))
    seen, keep_i = set(), []
    for i, (x, y) in enumerate(zip(xs, ys)):
        tx_, ty_ = tuple(x), tuple(y)
        if (cfg.output_only or tx_ not in train_x) and ty_ not in train_y and (tx_, ty_) not in seen:
            seen.add((tx_, ty_))
            keep_i.append(i)
    if cfg.n_sample is not None:
        keep_i = keep_i[: cfg.n_sample]
    out = pl.DataFrame({"x": [xs[i] for i in keep_i], "y": [ys[i] for i in keep_i],
                        "split": [SPLIT_NAME] * len(keep_i)},
                       schema={"x": pl.List(pl.String), "y": pl.List(pl.String), "split": pl.String})
    stats.update(
        synthesized=out.height,
        templates_used=len(set(chosen_t[keep_i].tolist())),
        fragments_used=len(set(chosen_f[keep_i].tolist())),
        seconds=round(clock(), 3),
        peak_rss_mb=round(_peak_rss_mb(), 1),
    )
    return GecaResult(out, stats, [tx[i] for i in keep_i], [fx[i] for i in keep_i], data)


def _empty_result(stats, clock, data) -> GecaResult:
    stats.update(templates=0, fragments=0, active_templates=0, active_fragments=0,
                 template_fragment_pairs=0, proposals=0, synthesized=0,
                 templates_used=0, fragments_used=0, seconds=round(clock(), 3),
                 peak_rss_mb=round(_peak_rss_mb(), 1))
    empty = pl.DataFrame(schema={"x": pl.List(pl.String), "y": pl.List(pl.String), "split": pl.String})
    return GecaResult(empty, stats, train=data)


def _realize_and_filter(c, u, hasher, data, rep_units, frag_grams, gram_len, gram_rep,
                        rows_t, rows_f, cfg, chunk: int = 1_000_000):
    """Hash the realized input and output of every proposal (template rows filled with the
    fragment's spans), keep the novel ones (per side), first occurrence of each pair, in
    proposal order, stopping once n_sample are found. Returns (template, fragment) arrays."""
    lo_x, hi_x = c.off[:-1] + 1, c.off[:-1] + 1 + c.nx
    lo_y, hi_y = hi_x + 1, c.off[1:] - 1
    empty = np.zeros(0, np.int64)
    no_rows = (empty, empty, empty, (empty.astype(U64), empty.astype(U64)), empty)
    train_x = np.unique(hasher.rewrites(lo_x, hi_x, *no_rows))
    train_y = np.unique(hasher.rewrites(lo_y, hi_y, *no_rows))
    gh = hasher.span(gram_rep, gram_len)
    # replaced occurrences of each template's representative instance
    r_inst, r_pos, r_len, r_k = _rep_rows(u, rep_units)
    r_start = np.searchsorted(r_inst, np.arange(len(rep_units) + 1))
    seen = np.zeros(0, U64)
    kept_t, kept_f = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    n_kept = 0
    for begin in range(0, len(rows_t), chunk):
        t, f = rows_t[begin: begin + chunk], rows_f[begin: begin + chunk]
        cnt = r_start[t + 1] - r_start[t]
        g, w = _segments(cnt)
        j = r_start[t][g] + w
        pos, length, k = r_pos[j], r_len[j], r_k[j]
        gram = frag_grams[f[g], k]
        rh = (gh[0][gram], gh[1][gram])
        rlen = gram_len[gram].astype(np.int64)
        ex = u.ex[rep_units[t, 0]]
        sep = c.off[ex] + c.nx[ex] + 1
        in_x = pos < sep[g]
        hx = hasher.rewrites(lo_x[ex], hi_x[ex], g[in_x], pos[in_x], length[in_x],
                             (rh[0][in_x], rh[1][in_x]), rlen[in_x])
        hy = hasher.rewrites(lo_y[ex], hi_y[ex], g[~in_x], pos[~in_x], length[~in_x],
                             (rh[0][~in_x], rh[1][~in_x]), rlen[~in_x])
        novel = ~np.isin(hy, train_y)
        if not cfg.output_only:
            novel &= ~np.isin(hx, train_x)
        idx = np.flatnonzero(novel)
        pair_key = hx[idx] ^ _mix(hy[idx])
        _, first, _ = _unique(pair_key)
        first = np.sort(first)
        idx, pair_key = idx[first], pair_key[first]
        fresh = ~np.isin(pair_key, seen)
        idx, pair_key = idx[fresh], pair_key[fresh]
        if cfg.n_sample is not None:
            room = cfg.n_sample + 16 - n_kept
            idx, pair_key = idx[:room], pair_key[:room]
        seen = np.concatenate([seen, pair_key])
        kept_t.append(t[idx])
        kept_f.append(f[idx])
        n_kept += len(idx)
        if cfg.n_sample is not None and n_kept >= cfg.n_sample + 16:
            break
    return np.concatenate(kept_t), np.concatenate(kept_f)


def _materialize(c, u, rep_units, frag_grams, gram_len, gram_rep, ts, fs):
    """Token lists of the chosen (template, fragment) proposals (only the output rows)."""
    vocab = c.vocab + ["##", "<s>", "</s>"] + [f"WUG{k}" for k in range(8)]
    r_inst, r_pos, r_len, r_k = _rep_rows(u, rep_units[ts]) if len(ts) else ([], [], [], [])
    r_start = np.searchsorted(r_inst, np.arange(len(ts) + 1)) if len(ts) else [0]
    flat = c.flat
    xs, ys, templs, frags = [], [], [], []
    for i, (t, f) in enumerate(zip(ts.tolist(), fs.tolist())):
        ex = int(u.ex[rep_units[t, 0]])
        lo, hi = int(c.off[ex]), int(c.off[ex + 1])
        seq, tmpl = [], []
        p = lo + 1
        for j in range(r_start[i], r_start[i + 1]):
            pos, k = int(r_pos[j]), int(r_k[j])
            seq += flat[p:pos].tolist()
            tmpl += flat[p:pos].tolist()
            gram = frag_grams[f, k]
            start = int(gram_rep[gram])
            seq += flat[start: start + int(gram_len[gram])].tolist()
            tmpl.append(c.wug0 + k)
            p = pos + int(r_len[j])
        seq += flat[p: hi - 1].tolist()
        tmpl += flat[p: hi - 1].tolist()
        cut = seq.index(c.sep)
        xs.append([vocab[t_] for t_ in seq[:cut]])
        ys.append([vocab[t_] for t_ in seq[cut + 1:]])
        cut_t = tmpl.index(c.sep)
        templs.append((" ".join(vocab[t_] for t_ in tmpl[:cut_t]),
                       " ".join(vocab[t_] for t_ in tmpl[cut_t + 1:])))
        spans = [g for g in frag_grams[f].tolist() if g >= 0]
        frags.append(" | ".join(" ".join(vocab[t_] for t_ in
                                         flat[gram_rep[g]: gram_rep[g] + gram_len[g]].tolist())
                                for g in spans))
    return xs, ys, templs, frags


# ---------------------------------------------------------------------------- files

SCAN_HOLDOUT = 640   # the reference's n_batch * 10 validation examples


def make_config(preset: str | None = None, overrides: dict | None = None,
                data: str | None = None, reference_split: bool | None = None) -> GecaConfig:
    """A config from a preset plus explicit overrides (None values are ignored).

    ``reference_split`` None (auto) holds out the reference's 640 SCAN validation
    examples exactly when the scan preset runs on a named SCAN data set (``scan/...``);
    a file such as the reference's own training set is used as it is."""
    values = load_preset(preset) if preset else {}
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    if reference_split is None:
        reference_split = preset == "scan" and bool(data) and data.startswith("scan/")
    if reference_split:
        values.setdefault("holdout", SCAN_HOLDOUT)
    known = {f.name for f in fields(GecaConfig)}
    unknown = set(values) - known
    if unknown:
        raise UserError(f"unknown GECA option(s): {', '.join(sorted(unknown))}")
    return GecaConfig(**values)


def load_training(data: str, data_dir=None) -> pl.DataFrame:
    """The train split of a named data set, or every example of a data file."""
    from compgen.data import load_dataset, select_split

    table = load_dataset(data, data_dir)
    if "split" in table.columns and table.height:
        table = select_split(table, "train")
    if table.height == 0:
        raise UserError(f"{data}: no training examples")
    return table


def augment_file(data: str, output, config: GecaConfig, concat: bool = False, data_dir=None,
                 progress=None) -> GecaResult:
    """Run GECA on the train split of ``data`` and write the synthesized examples (after
    the training examples with ``concat``) as a samples TSV, atomically."""
    from compgen.io import write_samples_tsv

    config.validate()
    result = geca_augment(load_training(data, data_dir), config, progress=progress)
    rows = list(zip(result.table["x"].to_list(), result.table["y"].to_list()))
    if concat:
        rows = list(zip(result.train["x"].to_list(), result.train["y"].to_list())) + rows
    result.stats["rows_written"] = write_samples_tsv(output, rows)
    return result


def config_dict(cfg: GecaConfig) -> dict:
    return asdict(cfg)
