"""The prototype encoder's results per distinct prototype, kept across batches and rounds
(the exported backends' half of the decoding contract's "prototypes" clause)."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

# A long job cycles through the stored tuples many times; an LRU cache smaller than their
# distinct prototypes misses most of them on every pass (the shipped SCAN export: 8,136
# distinct prototypes, 433 MB encoded; 256 MB made a 3,000-sample job 25 % slower).
CACHE_BYTES = 768 << 20


class PrototypeCache:
    """The prototype encoder's results per distinct prototype, computed once: prototypes
    are encoded row by row (``Recombine.encode_sequences``), each padded to the contract's
    ``prototype_width``, so one met again - in the same batch, in another tuple, in a
    later round - costs nothing; the encoder graph then gathers them per tuple.
    ``encode_sequences(seqs)`` ``(N, T)`` -> (encoded, h_final, c_final) arrays, one row
    per prototype; ``encode_tuples(encoded, h_final, c_final, protos, z)`` (the first
    three gathered to ``(B, K, ...)``) -> dict of ``keys``, ``values``, ``mask``, ``h``,
    ``c``. At most ``budget`` bytes are kept, the least recently used dropped first;
    ``encoded`` counts the prototypes the encoder ran on."""

    def __init__(self, encode_sequences, encode_tuples, budget: int = CACHE_BYTES):
        self.encode_sequences, self.encode_tuples, self.budget = (encode_sequences,
                                                                  encode_tuples, budget)
        self.store: OrderedDict[bytes, tuple] = OrderedDict()
        self.size = self.encoded = 0

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
            results = self.encode_sequences(np.ascontiguousarray(distinct[missing]))
            self.encoded += len(missing)
            for n, j in enumerate(missing):  # copies: a kept row must not hold the batch
                fresh[names[j]] = tuple(np.array(a[n]) for a in results)
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
        gathered = [np.stack([rows[j][i] for j in order]).reshape(B, K, *rows[0][i].shape)
                    for i in range(3)]
        return self.encode_tuples(*gathered, protos, z)

    def _keep(self, name: bytes, row: tuple) -> None:
        size = sum(a.nbytes for a in row)
        if size > self.budget:
            return
        while self.size + size > self.budget:
            _, dropped = self.store.popitem(last=False)
            self.size -= sum(a.nbytes for a in dropped)
        self.store[name] = row
        self.size += size
