"""The prototype encoder's results per distinct prototype, kept across batches and rounds
(the exported backends' half of the decoding contract's "prototypes" clause)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np

# A long job cycles through the stored tuples many times; an LRU cache smaller than their
# distinct prototypes misses most of them on every pass (the shipped SCAN export: 8,136
# distinct prototypes, 433 MB encoded; 256 MB made a 3,000-sample job 25 % slower).
CACHE_BYTES = 768 << 20


class ArrayOps:
    """How the cache copies, sizes and stacks the encoder graph's memory: NumPy arrays
    here; a runtime whose graph returns tensors passes its own."""

    @staticmethod
    def copy(row):
        return np.array(row)

    @staticmethod
    def nbytes(row) -> int:
        return row.nbytes

    @staticmethod
    def stack(rows: list, axis: int = 0):
        return np.stack(rows, axis)


@dataclass
class Kept:
    """What is kept of one prototype: its encoding and final states, and (with ``ops``) the
    attention memory (keys, values, mask) of each slot it has been met in. The encoding is
    dropped once every slot's memory is kept: nothing reads it after that."""

    encoded: np.ndarray | None
    h_final: np.ndarray
    c_final: np.ndarray
    memory: dict[int, tuple] = field(default_factory=dict)
    met: set[int] = field(default_factory=set)   # slots met in a batch-wide round, not kept


class PrototypeCache:
    """The prototype encoder's results per distinct prototype, computed once: prototypes
    are encoded row by row (``Recombine.encode_sequences``), each padded to the contract's
    ``prototype_width``, so one met again - in the same batch, in another tuple, in a
    later round - costs nothing; the encoder graph then gathers them per tuple.
    ``encode_sequences(seqs)`` ``(N, T)`` -> (encoded, h_final, c_final) arrays, one row
    per prototype; ``encode_tuples(encoded, h_final, c_final, protos, z)`` (the first
    three gathered to ``(B, K, ...)``) -> dict of ``keys``, ``values``, ``mask``, ``h``,
    ``c``. At most ``budget`` bytes are kept, the least recently used prototype dropped
    first; ``encoded`` counts the prototypes the encoder ran on, ``memory_rows`` the
    (prototype, slot) rows the encoder graph computed the memory of.

    ``ops`` given (exact fp32 graphs): the attention memory is kept per (prototype, slot)
    too. The encoder graph's keys, values and mask at a position of slot k are a function
    of that position's encoding, its token and k alone (``Recombine._memory``: dense
    layers per position), so a round where at least half of the batch's pairs are kept
    runs the encoder graph only on the pairs not kept - packed, slot k of graph row r
    holding the r-th prototype new to slot k - gathers the batch's memory from the kept
    rows, and runs the encoder graph on one position per prototype for the initial state
    (which reads the final states only). A round with fewer kept (the first pass over
    the tuples) runs it batch-wide, as without ``ops``, and keeps the memory of the pairs
    it meets a second time: a one-pass job copies nothing, a long job soon finds its pairs
    kept. The same products on other rows: the same bits (the products' sums run over the
    feature axis, whatever the batch); the tests compare the memory with that of the
    batch-wide graph, and the samples on every backend."""

    def __init__(self, encode_sequences, encode_tuples, budget: int = CACHE_BYTES,
                 ops: type[ArrayOps] | ArrayOps | None = None):
        self.encode_sequences, self.encode_tuples, self.budget = (encode_sequences,
                                                                  encode_tuples, budget)
        self.ops = ops
        self.store: OrderedDict[bytes, Kept] = OrderedDict()
        self.size = self.encoded = self.memory_rows = 0
        self.encoding = None   # (feature width, dtype) of the prototype encoder's outputs

    def __call__(self, protos: np.ndarray, z: np.ndarray) -> dict:
        B, K, T = protos.shape
        if K == 0:  # nothing to encode: the encoder graph does not read these
            empty = np.zeros((B, 0, 1), np.float32)
            return self.encode_tuples(empty[..., None], empty, empty, protos, z)
        distinct, inverse = np.unique(protos.reshape(B * K, T), axis=0, return_inverse=True)
        index = inverse.reshape(B, K)
        names = [row.tobytes() for row in distinct]
        # taken out while in use (a small budget may not hold the whole batch), kept again
        # below as the most recently used
        rows = [self.store.pop(name, None) for name in names]
        self.size -= sum(self.nbytes(row) for row in rows if row is not None)
        missing = [j for j, row in enumerate(rows) if row is None]
        if missing:
            fresh = self._fresh(np.ascontiguousarray(distinct[missing]))
            for j, row in zip(missing, fresh):
                rows[j] = row
        finals = [np.stack([row.h_final for row in rows])[index],
                  np.stack([row.c_final for row in rows])[index]]
        if self.ops is None or self._batch_wide(rows, index):
            encoded = np.stack([row.encoded for row in rows])[index]
            result = self.encode_tuples(encoded, *finals, protos, z)
            if self.ops is not None:
                self.memory_rows += B * K
                self._keep_met_again(rows, index, result)
        else:
            self._add_memory(rows, distinct, index, z)
            width, dtype = self.encoding
            one = np.zeros((B, K, 1, width), dtype)   # the initial state reads the finals only
            start = self.encode_tuples(one, *finals, np.ascontiguousarray(protos[:, :, :1]), z)
            stack = self.ops.stack
            keys, values, mask = (
                stack([stack([rows[j].memory[k][i] for j in index[:, k]]) for k in range(K)], 1)
                for i in range(3))
            result = {"keys": keys, "values": values, "mask": mask, "h": start["h"],
                      "c": start["c"]}
        for name, row in zip(names, rows):
            self._keep(name, row)
        return result

    @staticmethod
    def _pairs(index: np.ndarray) -> dict[tuple[int, int], int]:
        """The round's distinct (prototype, slot) pairs, each with its first tuple."""
        pairs: dict[tuple[int, int], int] = {}
        for k in range(index.shape[1]):
            for b, j in enumerate(index[:, k].tolist()):
                pairs.setdefault((j, k), b)
        return pairs

    def _batch_wide(self, rows: list[Kept], index: np.ndarray) -> bool:
        """Whether this round runs the encoder graph on the whole batch: when fewer than
        half of its pairs are kept (a first pass over the tuples: gathering would only add
        work) and every prototype still has its encoding."""
        pairs = self._pairs(index)
        kept = sum(k in rows[j].memory for j, k in pairs)
        return 2 * kept < len(pairs) and all(row.encoded is not None for row in rows)

    def _keep_met_again(self, rows: list[Kept], index: np.ndarray, result: dict) -> None:
        """After a batch-wide round: keep the memory of the pairs met in an earlier round
        (a pair met once, as in a one-pass job, is not worth its copy), mark the others."""
        copy = self.ops.copy
        for (j, k), b in self._pairs(index).items():
            row = rows[j]
            if k in row.memory:
                continue
            if k not in row.met:
                row.met.add(k)
                continue
            row.memory[k] = tuple(copy(result[name][b, k]) for name in ("keys", "values", "mask"))
            self._drop_encoding_if_done(row, index.shape[1])

    @staticmethod
    def _drop_encoding_if_done(row: Kept, K: int) -> None:
        if len(row.memory) == K:
            row.encoded = None

    def _fresh(self, seqs: np.ndarray) -> list[Kept]:
        """What is kept of new prototypes ``seqs`` ``(N, T)``, as copies: a kept row must
        not hold the batch."""
        encoded, h_final, c_final = self.encode_sequences(seqs)
        self.encoded += len(seqs)
        self.encoding = (encoded.shape[-1], encoded.dtype)
        return [Kept(np.array(encoded[n]), np.array(h_final[n]), np.array(c_final[n]))
                for n in range(len(seqs))]

    def _add_memory(self, rows: list[Kept], distinct: np.ndarray, index: np.ndarray,
                    z: np.ndarray) -> None:
        """Run the encoder graph on the (prototype, slot) pairs of ``index`` whose memory is
        not kept: graph row r, slot k holds the r-th prototype new to slot k (slots with
        fewer repeat their first, computed and not kept)."""
        K = index.shape[1]
        new = [list(dict.fromkeys(j for j in index[:, k].tolist() if k not in rows[j].memory))
               for k in range(K)]
        n = max(map(len, new))
        if n == 0:
            return
        filler = next(slot[0] for slot in new if slot)
        picks = np.array([[slot[min(r, len(slot) - 1)] if slot else filler for slot in new]
                          for r in range(n)])                                   # (n, K)
        used, local = np.unique(picks, return_inverse=True)
        local = local.reshape(n, K)

        def gather(part: str) -> np.ndarray:
            return np.stack([getattr(rows[j], part) for j in used])[local]

        memory = self.encode_tuples(gather("encoded"), gather("h_final"), gather("c_final"),
                                    np.ascontiguousarray(distinct[picks]),
                                    np.zeros((n, z.shape[1]), z.dtype))
        self.memory_rows += n * K
        copy = self.ops.copy
        for k, slot in enumerate(new):
            for r, j in enumerate(slot):
                rows[j].memory[k] = tuple(copy(memory[name][r, k])
                                          for name in ("keys", "values", "mask"))
        for j in {j for slot in new for j in slot}:
            self._drop_encoding_if_done(rows[j], K)

    def nbytes(self, row: Kept) -> int:
        size = row.h_final.nbytes + row.c_final.nbytes
        if row.encoded is not None:
            size += row.encoded.nbytes
        if row.memory:
            size += sum(self.ops.nbytes(a) for slot in row.memory.values() for a in slot)
        return size

    def _keep(self, name: bytes, row: Kept) -> None:
        size = self.nbytes(row)
        if size > self.budget:
            return
        while self.size + size > self.budget:
            _, dropped = self.store.popitem(last=False)
            self.size -= self.nbytes(dropped)
        self.store[name] = row
        self.size += size
