"""Prototype neighbourhoods: which training data a generator may recombine.

A *generative datum* is ``x + ["<sep>"] + y`` (one token list). A neighbourhood triple
``(x, xp, xpp)`` says "learn to write datum x from prototypes xp and xpp". This package
builds the triples the R&R generators train on, the reduced lists for 0/1 prototypes,
and the sampling-time prototype sets Omega:

* SCAN jump ("long-short", :func:`long_short_neighborhood`): a long first prototype that
  differs from x in a few tokens, and a short second prototype close to the tokens x
  has and the first prototype lacks.
* SCAN around_right ("long-long", :func:`long_long_neighborhood`): two long prototypes
  each differing from x by one token type.
* SIGMORPHON (:func:`sig_neighborhoods`, built with the few-shot split in
  ``compgen.data.fewshot_neighbors`` and re-exported here): tag-set distances between
  inflection tables.

Similarity (SCAN) is ``1 - lev(a, b) / max(|a|, |b|)`` over token sequences; ``sim > 0.5``
is tested exactly on integer edit distances (``2 * lev < max``). Every all-pairs score
is computed in blocks with rapidfuzz (``process.cdist``) and numpy; the "random
permutation of the training set" the reference walks for each datum is a per-(datum,
candidate) hash key, so "the first k qualifying items in random order" is the k smallest
keys among the qualifying ones -- the same distribution without a Python loop.

Modules: ``triples`` (data, triples, training lists), ``scan`` (neighbourhoods),
``omega_scan`` and ``omega_sig`` (sampling-time prototype sets), ``omega_source`` (a
generator's Omega as a function), ``similarity`` and ``random_keys`` (the vectorised
building blocks; token-set bitmasks are ``compgen.data.bitmasks``).
"""

from compgen.data.fewshot_neighbors import sig_neighborhoods
from compgen.neighborhoods.omega_scan import (
    EXACT_CYCLE_LIMIT,
    TEMPLATE_SPLITS,
    PrototypeSet,
    scan_omega,
)
from compgen.neighborhoods.omega_sig import SIG_OMEGA_ROUNDS, PrototypeList, rare_tags, sig_omega
from compgen.neighborhoods.scan import (
    CANDIDATES_LONG_LONG,
    CAP_LONG_SHORT,
    FIRST_LONG_SHORT,
    LONG_SHORT_SPLITS,
    TOP_LONG_LONG,
    long_long_neighborhood,
    long_short_neighborhood,
    scan_neighborhood,
    unique_generative_data,
)
from compgen.neighborhoods.similarity import BLOCK, SIM
from compgen.neighborhoods.triples import TRIPLE_SCHEMA, generative_datum, prototype_sets

__all__ = [
    "BLOCK", "CANDIDATES_LONG_LONG", "CAP_LONG_SHORT", "EXACT_CYCLE_LIMIT", "FIRST_LONG_SHORT",
    "LONG_SHORT_SPLITS", "SIG_OMEGA_ROUNDS", "SIM", "TEMPLATE_SPLITS", "TOP_LONG_LONG",
    "TRIPLE_SCHEMA", "PrototypeList", "PrototypeSet", "generative_datum", "long_long_neighborhood",
    "long_short_neighborhood", "prototype_sets", "rare_tags", "scan_neighborhood", "scan_omega",
    "sig_neighborhoods", "sig_omega", "unique_generative_data",
]
