"""CSL (Qiu et al. 2022): induce a quasi-synchronous CFG from training pairs, fit a
latent-state model of rule choices, sample synthetic pairs from it.

Modules, one concept each: ``rules`` (QCFG rules and their text format), ``derive``
(the fast may-derive test and example statistics), ``unify`` (rule unifiers),
``chart`` (synchronous chart parsing with target pruning), ``induction`` (objective and
greedy search), ``forest`` (parse forests as arrays, batched), ``model`` (parametric
model, inside algorithm, Viterbi parser), ``sampler`` (forward sampling), ``run``
(induce -> fit -> sample with a summary), ``cogs_lf`` (COGS logical forms <-> the
variable-free form), ``target_cfg`` (target CFG files and the target checker).
"""
