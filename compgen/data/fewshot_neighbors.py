"""SIGMORPHON neighbourhoods of the few-shot splits (tag-set distances between items).

They are built with the split, as the reference's build script does: both draw from one
random state, chained across builds, so the split's reader computes them here."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compgen.data.bitmasks import popcount, tag_masks


def sig_neighborhoods(
    tags: Sequence[Sequence[str]],
    lemmas: Sequence[str],
    n_train: int,
    rand: np.random.RandomState,
    neighbors: int = 4,
) -> np.ndarray:
    """Morphology neighbourhoods of the few-shot splits: ``(len(tags), neighbors, 2)``
    index pairs ``[i1, i2]`` into the items, always pointing at training items
    (``0 .. n_train-1``).

    For item i with tag set M: first prototypes are the ``neighbors`` training items
    i1 != i with the smallest ``(|M ^ M1|, jaccard(lemma_i, lemma_i1), i1)``, where
    jaccard is the multiset character *similarity* (so dissimilar lemmas come first)
    and even-numbered items may not use a first prototype with their own tag set. The
    second prototype of (i, i1) is the training item i2 not in {i, i1}, with a tag set
    other than M and M1, covering M together with M1, with the smallest ``|M1 ^ M2|``
    (ties: smaller i2). If there is none, the next best first-stage item takes its place
    and the pair is put in random order.

    ``rand`` is consumed exactly as the reference build script does (a shuffle of the
    first-stage list per item, one two-element permutation per fallback), which matters
    because the few-shot splits chain one RandomState across builds.
    """
    n = len(tags)
    train = np.arange(n_train)
    # distinct tag sets (u of them) and distinct lemmas: scores are computed once per pair
    sets, sid = np.unique(tag_masks(tags), axis=0, return_inverse=True)
    sid = sid.ravel()
    words, lid = np.unique(np.asarray(lemmas, dtype=object).astype(str), return_inverse=True)
    lid = lid.ravel()
    chars: dict[str, int] = {}
    for word in words:
        for c in word:
            chars.setdefault(c, len(chars))
    counts = np.zeros((len(words), max(1, len(chars))), dtype=np.int16)
    rows = np.repeat(np.arange(len(words)), [len(w) for w in words])
    cols = np.fromiter((chars[c] for w in words for c in w), dtype=np.int64, count=len(rows))
    np.add.at(counts, (rows, cols), 1)
    train_words = np.unique(lid[:n_train])
    jac_u = np.zeros((len(words), len(words)))
    jac_u[:, train_words] = jaccard(counts, counts[train_words])

    tsid = sid[:n_train]
    same_set = sid[:, None] == tsid[None, :]  # (n, n_train)
    tag_dist = popcount(sets[:, None, :] ^ sets[None, :, :])[sid][:, tsid]
    jac = jac_u[lid][:, lid[:n_train]]
    allowed = train[None, :] != np.arange(n)[:, None]
    allowed &= ~(same_set & (np.arange(n) % 2 == 0)[:, None])
    first_len = allowed.sum(1)
    if (first_len < max(2, neighbors)).any():
        raise ValueError("too few training items for the neighbourhood")
    # lexicographic (tag distance, jaccard, index): 2*dist + jac keeps the order of the
    # pair exactly (jaccard values in [0, 1] differ by far more than a rounding step),
    # and ties go to the smaller index
    key = np.where(allowed, 2.0 * tag_dist + jac, np.inf)
    order = smallest_lex(key, max(2, neighbors))
    top = order[:, :neighbors]  # (n, k) = i1
    # second prototype for (M, M1) = (set of i, set of i1): a training tag set S other
    # than M and M1 with M - M1 - S empty and the smallest |M1 ^ S|; among items with
    # that set, the first. (i and i1 need no explicit exclusion: their sets are M, M1.)
    first_of = np.full(len(sets), n_train, dtype=np.int64)
    np.minimum.at(first_of, tsid, train)
    cand = np.nonzero(first_of < n_train)[0]  # train sets
    pair, pair_id = np.unique(
        np.stack([np.repeat(sid, neighbors), sid[top].ravel()], 1), axis=0, return_inverse=True
    )
    a, b = sets[pair[:, 0]], sets[pair[:, 1]]
    ok = (
        (cand[None, :] != pair[:, :1])
        & (cand[None, :] != pair[:, 1:])
        & (popcount(a[:, None, :] & ~b[:, None, :] & ~sets[cand][None, :, :]) == 0)
    )
    score = popcount(b[:, None, :] ^ sets[cand][None, :, :]) * (n_train + 1) + first_of[cand]
    best = first_of[cand][np.argmin(np.where(ok, score, np.iinfo(np.int64).max), axis=1)]
    has_second = ok.any(1)[pair_id.ravel()].reshape(n, neighbors)
    second = best[pair_id.ravel()].reshape(n, neighbors)
    # fallback partner: the best first-stage item other than i1
    fallback = np.where(np.arange(neighbors)[None, :] == 0, order[:, 1:2], order[:, :1])
    out = np.stack([top, np.where(has_second, second, fallback)], axis=-1)

    buffer = np.empty(n_train)
    for i in range(n):  # replay the reference's RNG consumption, in order
        rand.shuffle(buffer[: first_len[i]])
        for k in np.nonzero(~has_second[i])[0]:
            if rand.permutation(2)[0] == 1:
                out[i, k] = out[i, k, ::-1]
    return out


def smallest_lex(key: np.ndarray, k: int) -> np.ndarray:
    """Per row, the column ids of the k smallest keys, ties broken by column id (what a
    stable sort gives), without sorting whole rows."""
    kth = np.partition(key, k - 1, axis=1)[:, k - 1 : k]
    r, c = np.nonzero(key <= kth)
    o = np.lexsort((c, key[r, c], r))
    r, c = r[o], c[o]
    pos = np.arange(len(r)) - np.searchsorted(r, r)
    out = np.empty((key.shape[0], k), dtype=np.int64)
    keep = pos < k
    out[r[keep], pos[keep]] = c[keep]
    return out


def jaccard(counts_a: np.ndarray, counts_b: np.ndarray) -> np.ndarray:
    """Multiset Jaccard similarity |a & b| / |a | b| of character-count rows (all pairs);
    1 for equal strings, 0 if one is empty (float64, so equal ratios compare equal).
    |a & b| = sum_t [a >= t] . [b >= t] over count levels t: one exact matmul per level."""
    inter = np.zeros((len(counts_a), len(counts_b)), dtype=np.float32)
    for level in range(1, int(max(counts_a.max(initial=0), counts_b.max(initial=0))) + 1):
        inter += (counts_a >= level).astype(np.float32) @ (counts_b >= level).astype(np.float32).T
    inter = inter.astype(np.int64)
    union = (
        counts_a.sum(1, dtype=np.int64)[:, None] + counts_b.sum(1, dtype=np.int64)[None, :] - inter
    )
    return np.where(union > 0, inter / np.maximum(union, 1), 0.0)
