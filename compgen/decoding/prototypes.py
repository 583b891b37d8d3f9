"""The prototype encoder's results per distinct prototype, kept across batches and rounds
(the exported backends' half of the decoding contract's "prototypes" clause)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

# A long job cycles through the stored tuples many times; an LRU cache smaller than their
# distinct prototypes misses most of them on every pass (the shipped SCAN export: 8,136
# distinct prototypes, 433 MB encoded; 256 MB made a 3,000-sample job 25 % slower).
CACHE_BYTES = 768 << 20


class ArrayOps:
    """How the cache copies, sizes and gathers what the encoder graph returns: NumPy
    arrays here; a runtime whose graph returns tensors passes its own."""

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


class PrototypeCache:
    """The prototype encoder's results per distinct prototype, computed once: prototypes
    are encoded row by row (``Recombine.encode_sequences``), each padded to the contract's
    ``prototype_width``, so one met again - in the same batch, in another tuple, in a
    later round - costs nothing; the encoder graph then gathers them per tuple.
    ``encode_sequences(seqs)`` ``(N, T)`` -> (encoded, h_final, c_final) arrays, one row
    per prototype; ``encode_tuples(encoded, h_final, c_final, protos, z)`` (the first
    three gathered to ``(B, K, ...)``) -> dict of ``keys``, ``values``, ``mask``, ``h``,
    ``c``. At most ``budget`` bytes are kept, the least recently used dropped first;
    ``encoded`` counts the prototypes the encoder ran on.

    ``ops`` given (exact fp32 graphs): the attention memory is kept per prototype too.
    The encoder graph's keys, values and mask at a position of slot k are a function of
    that position's encoding, its token and k alone (``Recombine._memory``: dense layers
    per position), so each new prototype is run through the encoder graph once in every
    slot, and a batch's memory is gathered from those rows; the encoder graph then runs
    on one position per prototype, for the initial state (which reads the final states
    only). Per round this saves the keys and values of B x K x ``prototype_width``
    positions, most of them padding. The same products on other rows: the same bits
    (the products' sums run over the feature axis, whatever the batch); the tests
    compare the samples with those of the batch-wide graph on every backend."""

    def __init__(self, encode_sequences, encode_tuples, budget: int = CACHE_BYTES,
                 ops: type[ArrayOps] | ArrayOps | None = None):
        self.encode_sequences, self.encode_tuples, self.budget = (encode_sequences,
                                                                  encode_tuples, budget)
        self.ops = ops
        self.store: OrderedDict[bytes, tuple] = OrderedDict()
        self.size = self.encoded = 0
        self.encoding = None   # (feature width, dtype) of the prototype encoder's outputs

    def __call__(self, protos: np.ndarray, z: np.ndarray) -> dict:
        B, K, T = protos.shape
        if K == 0:  # nothing to encode: the encoder graph does not read these
            empty = np.zeros((B, 0, 1), np.float32)
            return self.encode_tuples(empty[..., None], empty, empty, protos, z)
        distinct, inverse = np.unique(protos.reshape(B * K, T), axis=0, return_inverse=True)
        names = [row.tobytes() for row in distinct]
        missing = [j for j, name in enumerate(names) if name not in self.store]
        fresh = {}
        if missing:
            fresh = self._fresh(np.ascontiguousarray(distinct[missing]), K, z)
            fresh = {names[j]: row for j, row in zip(missing, fresh)}
        rows = []
        for name in names:
            if name in fresh:
                rows.append(fresh[name])
            else:
                rows.append(self.store[name])
                self.store.move_to_end(name)
        for name, row in fresh.items():
            self._keep(name, row)
        order = inverse.ravel()
        if self.ops is None:
            gathered = [np.stack([rows[j][i] for j in order]).reshape(B, K, *rows[0][i].shape)
                        for i in range(3)]
            return self.encode_tuples(*gathered, protos, z)
        index = order.reshape(B, K)
        finals = [np.stack([row[i] for row in rows])[index] for i in (3, 4)]
        width, dtype = self.encoding
        one = np.zeros((B, K, 1, width), dtype)   # the initial state reads the finals only
        start = self.encode_tuples(one, *finals, np.ascontiguousarray(protos[:, :, :1]), z)
        keys, values, mask = (self.ops.take([row[i] for row in rows], index) for i in range(3))
        return {"keys": keys, "values": values, "mask": mask, "h": start["h"], "c": start["c"]}

    def _fresh(self, seqs: np.ndarray, K: int, z: np.ndarray) -> list[tuple]:
        """The rows kept for new prototypes ``seqs`` ``(N, T)``: (encoded, h_final, c_final),
        or with ``ops`` (keys, values, mask of every slot, h_final, c_final). Copies: a
        kept row must not hold the batch."""
        results = self.encode_sequences(seqs)
        self.encoded += len(seqs)
        if self.ops is None:
            return [tuple(np.array(a[n]) for a in results) for n in range(len(seqs))]
        encoded, h_final, c_final = results
        self.encoding = (encoded.shape[-1], encoded.dtype)

        def every_slot(a):
            return np.ascontiguousarray(np.repeat(a[:, None], K, 1))

        memory = self.encode_tuples(every_slot(encoded), every_slot(h_final),
                                    every_slot(c_final), every_slot(seqs),
                                    np.zeros((len(seqs), z.shape[1]), z.dtype))
        copy = self.ops.copy
        return [(copy(memory["keys"][n]), copy(memory["values"][n]), copy(memory["mask"][n]),
                 np.array(h_final[n]), np.array(c_final[n])) for n in range(len(seqs))]

    def _bytes(self, row: tuple) -> int:
        if self.ops is None:
            return sum(a.nbytes for a in row)
        return sum(self.ops.nbytes(a) for a in row[:3]) + row[3].nbytes + row[4].nbytes

    def _keep(self, name: bytes, row: tuple) -> None:
        size = self._bytes(row)
        if size > self.budget:
            return
        while self.size + size > self.budget:
            _, dropped = self.store.popitem(last=False)
            self.size -= self._bytes(dropped)
        self.store[name] = row
        self.size += size
