"""The training inputs as a token trie, for novelty-aware decoding (``--novel-inputs``).

A generator writes ``x <sep> y </s>``; with the novelty filter on, a candidate whose ``x``
is a training input is thrown away after it was decoded. With the trie, a search follows
every row's input side token by token and, at each step where the input written so far
is a complete training input, masks ``<sep>`` (the input-closing token): the row cannot
close a known input and goes on with another token instead.

What the samples then follow (temperature T, model p_T): at a masked step the next token
is drawn from p_T(. | prefix) without ``<sep>``, renormalised by 1 - p_T(<sep> | prefix).
A candidate x is therefore drawn with q(x) = p_T(x) / prod_k (1 - p_T(<sep> | x_<k)), the
product over the proper prefixes x_<k of x that are training inputs; rejection sampling
draws p_T(x) / (1 - P_T(x is a training input)). The two agree up to normalisation only
for inputs without such a prefix; inputs that extend a training input are drawn more
often (by 1 / (1 - p_T(<sep>)) per such prefix). Scores stay the model's own log p (the
masked token is never emitted; the emitted tokens' log-probabilities are not renormalised).

``cpp_runner/src/input_trie.hpp`` builds the same trie from the same inputs. Ids only: no
vocabulary and no model code here.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np


class InputTrie:
    """Nodes are ints: 0 the root (nothing written), ``off`` a prefix of no training
    input (and every row past ``<sep>``: no input holds it)."""

    def __init__(self, inputs: Iterable[Sequence[int]]):
        self._children: list[dict[int, int]] = [{}]
        complete = [False]
        for ids in inputs:
            node = 0
            for token in ids:
                child = self._children[node].get(int(token))
                if child is None:
                    child = len(self._children)
                    self._children[node][int(token)] = child
                    self._children.append({})
                    complete.append(False)
                node = child
            complete[node] = True
        self.off = len(self._children)
        # indexed by node, ``off`` included: True where the prefix is a training input
        self.complete = np.array(complete + [False], bool)

    def __len__(self) -> int:
        return self.off

    def start(self, rows: int) -> np.ndarray:
        """Every row at the root."""
        return np.zeros(rows, np.int64)

    def advance(self, nodes: np.ndarray, tokens: np.ndarray) -> np.ndarray:
        """The nodes after each row emitted its token."""
        off, children = self.off, self._children
        return np.fromiter((off if n == off else children[n].get(int(t), off)
                            for n, t in zip(nodes.tolist(), tokens.tolist())),
                           np.int64, len(nodes))

    def closes_known(self, nodes: np.ndarray) -> np.ndarray:
        """Rows whose ``<sep>`` now would close a training input (to be masked)."""
        return self.complete[nodes]
