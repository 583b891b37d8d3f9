"""Seed rules: arity-0 QCFG rules given to induction before it starts, never split or
removed by it.

COGS (paper App. A): ``inflected word ### lemma`` rules such as ``touched ### touch``,
read off an IBM Model 1 alignment of the training sources to their variable-free targets.
Without them induction has to explain every inflected verb form by a whole-example
rule. The reference's thresholds are not published; the choices here:

* IBM-1 with a NULL source word, uniform start, ``iterations`` EM rounds (5);
* for each source word w, its best translation t = argmax p(t | w) is kept when t is a
  verb lemma (a target token directly followed by ``(``, i.e. a call), w != t, and
  p(t | w) >= ``min_probability`` (0.2: argmax alone already names the lemma; the
  threshold only guards rare words);
* words that equal their lemma need no seed (induction keeps ``w ### w`` itself).

SCAN has no seed rules.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compgen.augment.csl.rules import Rule

Pairs = Sequence[tuple[Sequence[str], Sequence[str]]]
NULL = "<null>"


def ibm1_translation(pairs: Pairs, iterations: int = 5) -> tuple[list[str], list[str], np.ndarray]:
    """IBM Model 1 p(target token | source word), target tokens generated from the source
    words plus NULL. Returns (source vocabulary, target vocabulary, t[source, target])."""
    src_vocab = sorted({w for x, _ in pairs for w in x} | {NULL})
    tgt_vocab = sorted({t for _, y in pairs for t in y})
    s_id = {w: i for i, w in enumerate(src_vocab)}
    t_id = {t: i for i, t in enumerate(tgt_vocab)}
    encoded = [(np.array([s_id[NULL]] + [s_id[w] for w in x]), np.array([t_id[t] for t in y]))
               for x, y in pairs if len(y)]
    table = np.full((len(src_vocab), len(tgt_vocab)), 1.0 / len(tgt_vocab))
    for _ in range(iterations):
        counts = np.zeros_like(table)
        for src, tgt in encoded:
            probs = table[np.ix_(src, tgt)]              # (|x| + 1, |y|)
            posterior = probs / probs.sum(0, keepdims=True)
            np.add.at(counts, (src[:, None], tgt[None, :]), posterior)
        table = counts / np.maximum(counts.sum(1, keepdims=True), 1e-300)
    return src_vocab, tgt_vocab, table


def cogs_seed_rules(pairs: Pairs, iterations: int = 5, min_probability: float = 0.2) -> list[Rule]:
    """``word ### lemma`` for the inflected verb forms of variable-free COGS pairs."""
    lemmas = {y[i] for _, y in pairs for i in range(len(y) - 1) if y[i + 1] == "("}
    src_vocab, tgt_vocab, table = ibm1_translation(pairs, iterations)
    best = table.argmax(1)
    seeds = []
    for i, word in enumerate(src_vocab):
        target = tgt_vocab[best[i]]
        if (word != NULL and word != target and target in lemmas
                and table[i, best[i]] >= min_probability):
            seeds.append(Rule((word,), (target,), 0))
    return sorted(seeds)
