"""The prototype encoder's results per distinct prototype, kept across batches and rounds
(the exported backends' half of the decoding contract's "prototypes" clause)."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

# A long job cycles through the stored tuples many times; an LRU cache smaller than their
# distinct prototypes misses most of them on every pass (the shipped SCAN export: 8,136
# distinct prototypes, 433 MB encoded; 256 MB made a 3,000-sample job 25 % slower).
CACHE_BYTES = 768 << 20

MEMORY_NAMES = ("keys", "values", "mask")

# A round where one prototype in REVISITING was met in an earlier round says the job comes
# back to its prototypes: keeping their memory pays from then on. A one-pass job meets
# fewer again (the shipped export's 400-sample jobs: 0.8 % a round, 6 % at most; a
# 2,000-sample job at T 1: 13 % from its second round on).
REVISITING = 10


class ArrayOps:
    """How the cache copies, sizes and gathers the encoder graph's memory: NumPy arrays
    here; a runtime whose graph returns tensors passes its own."""

    @staticmethod
    def copy(row):
        return np.array(row)

    @staticmethod
    def nbytes(row) -> int:
        return row.nbytes

    @staticmethod
    def take(rows: list, index: np.ndarray):
        """``rows[index[b, k]][k]`` for every (b, k): ``(B, K, ...)``."""
        return np.stack(rows)[index, np.arange(index.shape[1])]


@dataclass
class Kept:
    """What is kept of one prototype: its final states, and either its encoding or (with
    ``ops``, from a gathering round on) the attention memory (keys, values, mask) of
    every slot, ``(K, width, ...)`` each - the memory is as large as the encoding, so a
    prototype never holds both."""

    encoded: np.ndarray | None
    h_final: np.ndarray
    c_final: np.ndarray
    memory: tuple | None = None
    met: bool = False   # met in an earlier round


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

    ``ops`` given (exact fp32 graphs): the attention memory is kept per prototype too.
    The encoder graph's keys, values and mask at a position of slot k are a function of
    that position's encoding, its token and k alone (``Recombine._memory``: dense layers
    per position), so once a job comes back to its prototypes - a round where one in
    ``REVISITING`` was met in an earlier round - each prototype of a round without its
    memory kept is run through the encoder graph once in every slot, its memory kept in
    place of its encoding, and the round gathers the batch's memory from the kept rows
    and runs the encoder graph on one position per prototype for the initial state (which
    reads the final states only). A round before that (a job's first rounds, a one-pass
    job's every round) runs the encoder graph batch-wide, as without ``ops``, with the
    kept rows of any prototype kept earlier in place of what it computed for it (zeros in
    place of its dropped encoding): a one-pass job computes what it would without ``ops``,
    a long job soon gathers every round. The same products on other rows: the same bits
    (the products' sums run over the feature axis, whatever the batch); the tests compare
    the memory with that of the batch-wide graph, and the samples on every backend."""

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
        # decided before encoding the new ones: a gathering round keeps their memory at once
        gathering = (self.ops is not None
                     and sum(row is not None and row.met for row in rows) * REVISITING
                     >= len(rows))
        if missing:
            fresh = self._fresh(np.ascontiguousarray(distinct[missing]), K if gathering else 0,
                                z)
            for j, row in zip(missing, fresh):
                rows[j] = row
        finals = [np.stack([row.h_final for row in rows])[index],
                  np.stack([row.c_final for row in rows])[index]]
        if self.ops is None:
            encoded = np.stack([row.encoded for row in rows])[index]
            result = self.encode_tuples(encoded, *finals, protos, z)
        elif gathering:   # the ones met before with their encoding kept: memory now
            self._add_memory(rows, distinct, [j for j, row in enumerate(rows)
                                              if row.memory is None], K, z)
            result = self._gathered(rows, index, finals, protos, z)
        else:
            result = self._batch_wide(rows, index, finals, protos, z)
        if self.ops is not None:
            for row in rows:
                row.met = True
        for name, row in zip(names, rows):
            self._keep(name, row)
        return result

    def _fresh(self, seqs: np.ndarray, K: int, z: np.ndarray) -> list[Kept]:
        """What is kept of new prototypes ``seqs`` ``(N, T)``, as copies (a kept row must
        not hold the batch): their encodings, or with ``K`` their memory in ``K`` slots."""
        encoded, h_final, c_final = self.encode_sequences(seqs)
        self.encoded += len(seqs)
        self.encoding = (encoded.shape[-1], encoded.dtype)
        if K:
            memory = self._every_slot(encoded, h_final, c_final, seqs, K, z)
            return [Kept(None, np.array(h_final[n]), np.array(c_final[n]), memory[n])
                    for n in range(len(seqs))]
        return [Kept(np.array(encoded[n]), np.array(h_final[n]), np.array(c_final[n]))
                for n in range(len(seqs))]

    def _add_memory(self, rows: list[Kept], distinct: np.ndarray, which: list[int], K: int,
                    z: np.ndarray) -> None:
        """The memory of prototypes ``which`` kept in place of their encoding."""
        if not which:
            return
        parts = [np.stack([getattr(rows[j], part) for j in which])
                 for part in ("encoded", "h_final", "c_final")]
        memory = self._every_slot(*parts, distinct[which], K, z)
        for n, j in enumerate(which):
            rows[j].memory, rows[j].encoded = memory[n], None

    def _every_slot(self, encoded, h_final, c_final, seqs: np.ndarray, K: int,
                    z: np.ndarray) -> list[tuple]:
        """Prototypes run through the encoder graph once in each of the ``K`` slots: their
        memory, one (keys, values, mask) of ``(K, ...)`` arrays each, copied."""

        def every_slot(a):
            return np.ascontiguousarray(np.repeat(a[:, None], K, 1))

        memory = self.encode_tuples(*map(every_slot, (encoded, h_final, c_final, seqs)),
                                    np.zeros((len(seqs), z.shape[1]), z.dtype))
        self.memory_rows += len(seqs) * K
        copy = self.ops.copy
        return [tuple(copy(memory[name][n]) for name in MEMORY_NAMES)
                for n in range(len(seqs))]

    def _gathered(self, rows: list[Kept], index: np.ndarray, finals: list, protos: np.ndarray,
                  z: np.ndarray) -> dict:
        """The batch's memory gathered from the kept rows; the initial state from the
        encoder graph on one position per prototype."""
        B, K = index.shape
        width, dtype = self.encoding
        one = np.zeros((B, K, 1, width), dtype)   # the initial state reads the finals only
        start = self.encode_tuples(one, *finals, np.ascontiguousarray(protos[:, :, :1]), z)
        keys, values, mask = (self.ops.take([row.memory[i] for row in rows], index)
                              for i in range(3))
        return {"keys": keys, "values": values, "mask": mask, "h": start["h"], "c": start["c"]}

    def _batch_wide(self, rows: list[Kept], index: np.ndarray, finals: list,
                    protos: np.ndarray, z: np.ndarray) -> dict:
        """The encoder graph on the whole batch; a prototype whose memory is kept gets its
        kept rows (the graph saw zeros for its dropped encoding)."""
        width, dtype = self.encoding
        blank = np.zeros((protos.shape[2], width), dtype)
        encoded = np.stack([blank if row.encoded is None else row.encoded
                            for row in rows])[index]
        result = self.encode_tuples(encoded, *finals, protos, z)
        self.memory_rows += index.size
        has_memory = np.array([row.memory is not None for row in rows])[index]
        for b, k in zip(*np.nonzero(has_memory)):
            kept = rows[index[b, k]].memory
            for i, name in enumerate(MEMORY_NAMES):
                result[name][b, k] = kept[i][k]
        return result

    def nbytes(self, row: Kept) -> int:
        size = row.h_final.nbytes + row.c_final.nbytes
        if row.encoded is not None:
            size += row.encoded.nbytes
        if row.memory is not None:
            size += sum(self.ops.nbytes(a) for a in row.memory)
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
