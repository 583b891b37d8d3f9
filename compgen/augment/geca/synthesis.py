"""``geca_augment``: the whole GECA run from a training table to synthesized examples."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np
import polars as pl

from compgen.augment.geca.arrays import peak_rss_mb, unique
from compgen.augment.geca.candidates import (
    DistinctTries,
    first_novel_per_template,
    join_tables,
    window_classes,
)
from compgen.augment.geca.config import GecaConfig
from compgen.augment.geca.extraction import encode, grams, instances, reference_holdout, units
from compgen.augment.geca.hashing import Hasher
from compgen.augment.geca.partitions import (
    Execution,
    candidate_proposals,
    check_execution,
    spill_folder,
)
from compgen.augment.geca.realisation import materialize, realize_and_filter
from compgen.augment.geca.shards import (
    extract_sharded,
    materialize_sharded,
    realize_sharded,
    shard_bounds,
    shard_count,
)
from compgen.augment.geca.templates import template_ids
from compgen.augment.usefulness import geca_reasons
from compgen.errors import UserError

SPLIT_NAME = "geca"


@dataclass
class GecaResult:
    table: pl.DataFrame                       # synthesized examples: x, y, split="geca"
    stats: dict = field(default_factory=dict)
    templates: list[tuple[str, str]] = field(default_factory=list)  # per example: (x, y) template text
    fragments: list[str] = field(default_factory=list)              # per example: substituted fragment
    train: pl.DataFrame | None = None         # the training examples used (after holdout/dedup)
    warnings: list[str] = field(default_factory=list)   # why nothing was synthesized


def _timer():
    start = time.perf_counter()
    return lambda: time.perf_counter() - start


def geca_augment(table: pl.DataFrame, config: GecaConfig | None = None, progress=None,
                 execution: Execution | None = None) -> GecaResult:
    """Synthesize examples from the training examples in ``table`` (see the package doc of
    compgen.augment.geca). ``execution`` says how the candidate joins run (in memory,
    in partitions under a memory budget, on Ray); the output is the same for all. No
    example synthesized: ``warnings`` says why."""
    cfg = config or GecaConfig()
    result = _synthesize(table, cfg, progress, execution)
    result.warnings = geca_reasons(result.stats, cfg.wug_size)
    return result


def _synthesize(table: pl.DataFrame, cfg: GecaConfig, progress,
                execution: Execution | None) -> GecaResult:
    execution = execution or Execution()
    cfg.validate()
    check_execution(execution)
    clock = _timer()
    say = progress or (lambda msg: None)
    if table.height == 0:
        raise UserError("no training examples in the data")
    for col in ("x", "y"):
        if col not in table.columns:
            raise UserError(f"the data has no '{col}' column")
    data = table.select("x", "y")
    n_raw = data.height
    data = reference_holdout(data, cfg.holdout, cfg.seed)
    if cfg.dedup:
        data = data.unique(maintain_order=True)
    stats = {"examples_in": n_raw, "training_examples": data.height}

    c = encode(data, cfg)
    n_shards = shard_count(c, execution)
    if n_shards > 1:
        stats["shards"] = n_shards
        bounds = shard_bounds(c, n_shards)
        with spill_folder(execution.spill_dir) as folder:
            st = extract_sharded(c, cfg, bounds, folder, stats, say)
        if st is None:
            return _empty_result(stats, clock, data)
        rows_t, rows_f = _proposals(st.ta_t, st.ta_f, st.n_t, st.env, st.frag_grams, st.ok_t,
                                    st.n_spans_t, cfg, execution, stats, say, clock)
        chosen_t, chosen_f = _per_template(
            *realize_sharded(c, _realize_config(cfg), bounds, st, rows_t, rows_f), cfg)
        texts = materialize_sharded(c, st, chosen_t, chosen_f)
    else:
        found = _extract_in_memory(c, cfg, stats, say, clock)
        if found is None:
            return _empty_result(stats, clock, data)
        u, hasher, rep_units, frag_grams, gram_len, gram_rep, joins = found
        rows_t, rows_f = _proposals(*joins, cfg, execution, stats, say, clock)
        chosen_t, chosen_f = _per_template(
            *realize_and_filter(c, u, hasher, data, rep_units, frag_grams, gram_len, gram_rep,
                                rows_t, rows_f, _realize_config(cfg)), cfg)
        texts = materialize(c, u, rep_units, frag_grams, gram_len, gram_rep, chosen_t, chosen_f)
    xs, ys, tx, fx = texts
    keep_i = _exact_check(xs, ys, data, cfg)
    out = pl.DataFrame({"x": xs.gather(keep_i), "y": ys.gather(keep_i),
                        "split": pl.Series([SPLIT_NAME] * len(keep_i), dtype=pl.String)})
    stats.update(
        synthesized=out.height,
        templates_used=len(set(chosen_t[keep_i].tolist())),
        fragments_used=len(set(chosen_f[keep_i].tolist())),
        seconds=round(clock(), 3),
        peak_rss_mb=round(peak_rss_mb(), 1),
    )
    templates = list(zip(tx["x"].gather(keep_i).to_list(), tx["y"].gather(keep_i).to_list()))
    return GecaResult(out, stats, templates, fx.gather(keep_i).to_list(), data)


def _extract_in_memory(c, cfg, stats, say, clock):
    """Extraction in one piece: the tables realisation reads, and the inputs of the joins
    (template-fragment pairs, template count, environment classes, fragment grams,
    usable templates, span counts)."""
    gids, gpos, gram_len, gram_rep, keep = grams(c, cfg)
    stats["kept_ngrams"] = int(keep.sum())
    u = units(c, gids, gpos, gram_len, keep)
    del gids, gpos
    inst = instances(c, u, cfg)
    stats["instances"] = len(inst)
    say(f"{len(inst):,} (example, fragment) instances")
    if len(inst) == 0:
        return None
    max_len = int(np.diff(c.off).max()) * cfg.wug_size + 2
    hasher = Hasher(c.flat, c.wug0 + 8, max_len)
    # a fragment is the tuple of its spans' gram ids, packed into one integer key
    frag_g = np.where(inst >= 0, u.gram[np.maximum(inst, 0)], -1)
    bits = max(1, int(len(gram_len) + 1).bit_length())
    if bits * 3 <= 63:
        fkey = ((frag_g[:, 0] + 1) << (2 * bits)) | ((frag_g[:, 1] + 1) << bits) | (frag_g[:, 2] + 1)
    else:
        df = pl.DataFrame({"a": frag_g[:, 0], "b": frag_g[:, 1], "c": frag_g[:, 2]})
        fkey = df.select(pl.struct("a", "b", "c").rank("dense")).to_series().to_numpy().astype(np.int64)
    del frag_g
    stats["fragments"] = pl.Series(fkey).n_unique()

    inst_t, n_t, keep_inst = template_ids(c, u, hasher, inst, fkey, cfg.template_sim == "window")
    stats["templates"] = n_t
    say(f"{n_t:,} templates, {stats['fragments']:,} fragments ({clock():.1f}s)")
    # only templates that can take part in a substitution stay (see template_ids)
    inst, fkey, inst_t = inst[keep_inst], fkey[keep_inst], inst_t[keep_inst]
    _, t_first, inst_t = unique(inst_t)
    _, f_first, inst_f = unique(fkey)
    frag_grams = np.where(inst[f_first] >= 0, u.gram[np.maximum(inst[f_first], 0)], -1)
    n_t, n_f = len(t_first), len(f_first)
    pair = unique(inst_t.astype(np.int64) * n_f + inst_f)[0]
    ta_t, ta_f = pair // n_f, pair % n_f
    del pair
    stats.update(active_templates=n_t, active_fragments=n_f, template_fragment_pairs=len(ta_t))
    say(f"{n_t:,} templates and {n_f:,} fragments can take part ({clock():.1f}s)")

    rep_units = inst[t_first]
    t_ex = u.ex[rep_units[:, 0]]
    sep_pos = c.off[t_ex] + c.nx[t_ex] + 1
    valid = rep_units >= 0
    uu = np.maximum(rep_units, 0)
    has_in = np.any(valid & (u.first[uu] < sep_pos[:, None]), axis=1)
    has_out = np.any(valid & (u.last[uu] > sep_pos[:, None]), axis=1)
    ok_t = has_out & (has_in | cfg.output_only)
    env = None
    if cfg.template_sim == "window":
        env = window_classes(c, u, hasher, rep_units, cfg.sim_window_size)
    joins = (ta_t, ta_f, n_t, env, frag_grams, ok_t, valid.sum(1))
    return u, hasher, rep_units, frag_grams, gram_len, gram_rep, joins


def _proposals(ta_t, ta_f, n_t, env, frag_grams, ok_t, n_spans_t, cfg, execution, stats,
               say, clock):
    """The proposals (template, fragment) in the global order whose fragment has as many
    spans as the template has wugs."""
    tables = join_tables(ta_t, ta_f, n_t, env, frag_grams)
    # novel_variants: novel_tries distinct candidates are proposed; the cap per template
    # (variants) comes after the novelty check
    tried = DistinctTries(cfg.novel_tries) if cfg.novel_variants else cfg.variants
    rows_t, rows_f = candidate_proposals(tables, ok_t, tried, cfg.seed, execution, stats, say)
    del tables
    stats["proposals"] = len(rows_t)
    say(f"{len(rows_t):,} proposals ({clock():.1f}s)")
    n_spans_f = (frag_grams >= 0).sum(1)
    same = n_spans_t[rows_t] == n_spans_f[rows_f]
    return rows_t[same], rows_f[same]


def _realize_config(cfg: GecaConfig) -> GecaConfig:
    """The config realisation runs with: without the n_sample cap when the cap per template
    (novel_variants) still has to choose among the novel proposals."""
    return replace(cfg, n_sample=None) if cfg.novel_variants else cfg


def _per_template(chosen_t, chosen_f, cfg: GecaConfig):
    """The novel proposals (in proposal order) that stay: all of them, or with
    novel_variants at most ``variants`` per template, then the first n_sample (+ a margin
    for the exact re-check)."""
    if not cfg.novel_variants:
        return chosen_t, chosen_f
    keep = first_novel_per_template(chosen_t, chosen_f, cfg.variants, cfg.seed)
    if cfg.n_sample is not None:
        keep = keep[: cfg.n_sample + 16]
    return chosen_t[keep], chosen_f[keep]


def _exact_check(xs, ys, data: pl.DataFrame, cfg) -> np.ndarray:
    """Indices of the realized examples that are exactly novel (per side) and not
    repeated, in order, up to n_sample: a re-check of what the hashes decided."""
    cand = pl.DataFrame({"i": pl.Series(range(len(xs)), dtype=pl.Int64), "x": xs, "y": ys})
    if not cfg.output_only:
        cand = cand.join(data.select("x").unique(), on="x", how="anti")
    cand = (cand.join(data.select("y").unique(), on="y", how="anti").sort("i")
            .unique(subset=["x", "y"], keep="first", maintain_order=True))
    keep_i = cand["i"].to_numpy()
    return keep_i if cfg.n_sample is None else keep_i[: cfg.n_sample]


def _empty_result(stats, clock, data) -> GecaResult:
    stats.update(templates=0, fragments=0, active_templates=0, active_fragments=0,
                 template_fragment_pairs=0, proposals=0, synthesized=0,
                 templates_used=0, fragments_used=0, seconds=round(clock(), 3),
                 peak_rss_mb=round(peak_rss_mb(), 1))
    empty = pl.DataFrame(schema={"x": pl.List(pl.String), "y": pl.List(pl.String), "split": pl.String})
    return GecaResult(empty, stats, train=data)
