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

Corpus scale: ``geca_augment(table, config, execution=Execution(memory_budget=4 << 30))``
runs the candidate joins in partitions by a hash of the environment class, each sized to
the budget, spilled to Parquet in a temporary folder that is always removed;
``Execution(ray="local")`` or a cluster address runs the partitions as Ray tasks. The
output is the same for every partition count and on Ray (``partitions``).

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
* ``novel_variants`` False (the reference): ``variants`` fragments are tried per
  template, novel or not. True (the generic preset): every candidate is tried and at most
  ``variants`` of the novel examples are kept per template, drawn in a seeded order. On
  data whose training set already holds most recombinations (a compositional split with a
  held-out primitive) the tried candidates mostly rebuild training pairs, so the
  reference's count leaves a template with nothing new.
* ``novel_tries`` with novel_variants: distinct candidates tried per template, a run of
  its candidate list from a seeded start (None = all); it bounds the work on large data.
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

Modules: ``config`` (options, presets), ``extraction`` (integer sequences, n-grams,
instances), ``hashing``, ``templates``, ``candidates`` (generation), ``realisation``,
``synthesis`` (``geca_augment``), ``partitions`` (the joins under a memory budget, on
Ray), ``files`` (data sets and TSV output), ``arrays``
(numpy helpers).

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
  same candidate multiset (duplicates kept, as in the reference) with uniform values
  from a counter-based stream keyed by the seed and the template id, and templates are
  visited in a seeded random order (a seeded hash of the template id) before the
  ``n_sample`` cap, so neither depends on how the joins are partitioned.
* ``max_adjacencies`` is not offered (no effect with template_sim none; see spec §5).

Reproduced quirks: replace-all templating over both sides; second/third spans searched
from position i+1 of the already rewritten sequence (so with wug_count 3 a third span
can be missed after a multi-token second span that also occurs earlier); token-type
disjointness; ``max_comp_len`` with ``>=``; novelty per side; candidates keep one copy
per supplying template.
"""

from compgen.augment.geca.config import (
    PRESETS,
    SCAN_HOLDOUT,
    GecaConfig,
    config_dict,
    load_preset,
    make_config,
)
from compgen.augment.geca.extraction import reference_holdout
from compgen.augment.geca.files import augment_file, load_training
from compgen.augment.geca.partitions import Execution, parse_memory_budget
from compgen.augment.geca.synthesis import SPLIT_NAME, GecaResult, geca_augment

__all__ = ["PRESETS", "SCAN_HOLDOUT", "SPLIT_NAME", "Execution", "GecaConfig", "GecaResult",
           "augment_file", "config_dict", "geca_augment", "load_preset", "load_training",
           "make_config", "parse_memory_budget", "reference_holdout"]
