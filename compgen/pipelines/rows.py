"""The paper's experiments as named table rows (``compgen pipeline NAME``) and the rows of
a user's own data (``compgen pipeline own --data PATH``): what each row augments with,
which presets it trains, how it samples. ``runs.py`` holds the steps that run a row."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from compgen.data.task import task_of
from compgen.decoding.options import NO_ROUND_CAP
from compgen.errors import SettingError, UserError

if TYPE_CHECKING:
    from compgen.data.dataset import Dataset

SCAN_SPLITS = {"jump": "jump", "around_right": "around right"}  # split -> rare phrase
SIG_LANGUAGES = ("spanish", "swahili", "turkish")
SIG_HINTS = (4, 8, 16)
# the reference's augmentation probability (predictor) per SCAN split; GECA: its own recipe
SCAN_P_AUG = {"jump": 0.01, "around_right": 0.2}
GECA_P_AUG = 0.1
# CSL (Qiu et al. 2022) fine-tunes T5 on the training set concatenated with 100,000
# samples; here the project's seq2seq draws a sample with this probability instead, so
# an epoch stays the size of the training set
CSL_SPLITS = ("length", "jump", "around_right")
CSL_P_AUG = 0.5
CSL_SAMPLES = 100_000
CSL_PREDICTOR = "seq2seq_scan_csl_cpu"  # max_len 50: room for SCAN's 48-action outputs
# The reference's around_right recomb-2 script (rr-spec §5.2-5.4, §6, §8): sampling on the
# checkpoint with its test-time dropout, mixed sampler at T 0.2 throughout, no rare-word
# filter (SCAN's is never switched on in the reference), rounds of 128 until 500 novel
# unique samples are accepted (no cap), the 300 most probable kept; generator and
# predictor at the reference's sizes. Options given on the command line still win.
REFERENCE_PRESETS = ("recombine_scan_around_right", "seq2seq_scan")
REFERENCE_SAMPLING = {"strategy": "mixed", "temperature": 0.2, "resample": "none",
                      "n": 300, "nsamples": 500}
REFERENCE_RECIPE = {"max_rounds": NO_ROUND_CAP, "raise_temperature": False,
                    "test_dropout": True, "prototype_cut": "mean", "rare_prototypes": False}


@dataclass(frozen=True)
class Run:
    name: str
    data: str                   # data set; "{seed}" is replaced by the seed (SIG splits)
    label: str                  # the paper's row name, used in result tables
    augment: str = "none"       # none | geca | csl | csl-uniform | generator | direct
    generator: dict = field(default_factory=dict)  # preset overrides, "model.copy": False ...
    sample: dict = field(default_factory=dict)     # strategy, temperature, resample, ...
    p_aug: float | None = None  # None: concatenation
    task: str = "scan"          # scan | morphology | semparse | own
    predictor: str | None = None  # predictor preset at --size cpu instead of the task's
    # (generator, predictor) at every --size; a predictor None: sized from the data
    presets: tuple[str, str | None] | None = None
    recipe: dict = field(default_factory=dict)  # PipelineOptions the run sets unless given
    geca_preset: str | None = None  # None: the scan preset on SCAN, else semparse
    # own data: the user's set, read once (with the fields named); a named set: None here,
    # read once per seed by the pipeline before its steps
    dataset: Dataset | None = field(default=None, compare=False, repr=False)

    def data_for(self, seed: int) -> str:
        return self.data.format(seed=seed)

    def dataset_for(self, seed: int) -> Dataset | str:
        """What the steps train on: the own data set as read, else the name to read."""
        return self.dataset if self.dataset is not None else self.data_for(seed)

    @property
    def table_data(self) -> str:
        """The data column of result tables: the same for every seed."""
        return self.data.replace(".{seed}", "")


def _scan_runs(split: str) -> dict[str, Run]:
    data, rare, p_aug = f"scan/{split}", SCAN_SPLITS[split], SCAN_P_AUG[split]
    # the reference's samplers (spec §5.2): recomb-1 mixed T 0.4 jump / 0.5 around_right;
    # recomb-2 beam for jump, mixed T 0.2 for around_right; basic: mixed T 0.5. Mixed draws
    # the command at T and decodes its actions greedily.
    recomb1_t = 0.4 if split == "jump" else 0.5
    recomb2 = ({"strategy": "beam"} if split == "jump" else
               {"strategy": "mixed", "temperature": 0.2})
    # samples kept: jump the 400 most probable of 500 (the presets'), around_right 300 of 500
    kept = {} if split == "jump" else {"n": 300, "nsamples": 500}
    resampled = {"resample": "rare", "rare": rare}
    rows = {
        "baseline": Run("baseline", data, "baseline"),
        "geca": Run("geca", data, "GECA", augment="geca", p_aug=GECA_P_AUG),
        "basic": Run("basic", data, "learned aug. (basic)", "generator",
                     {"model.nproto": 0, "model.copy": False},
                     {"strategy": "mixed", "temperature": 0.5}, p_aug),
        "basic-resample": Run("basic-resample", data, "+ resampling", "generator",
                              {"model.nproto": 0, "model.copy": False},
                              {"strategy": "mixed", "temperature": 0.5, **resampled}, p_aug),
        "recomb1": Run("recomb1", data, "+ recomb-1", "generator", {"model.nproto": 1},
                       {"strategy": "mixed", "temperature": recomb1_t, **resampled}, p_aug),
        "recomb2": Run("recomb2", data, "+ recomb-2", "generator", {"model.nproto": 2},
                       {**recomb2, **resampled}, p_aug),
        "recomb2-noresample": Run("recomb2-noresample", data, "recomb-2 (no resampling)",
                                  "generator", {"model.nproto": 2}, dict(recomb2), p_aug),
        "recomb2-vae": Run("recomb2-vae", data, "recomb-2 + VAE", "generator",
                           {"model.nproto": 2, "model.vae": True}, {**recomb2, **resampled}, p_aug),
        "recomb2-nocopy": Run("recomb2-nocopy", data, "recomb-2 - copying", "generator",
                              {"model.nproto": 2, "model.copy": False}, {**recomb2, **resampled},
                              p_aug),
        "direct": Run("direct", data, "direct inference", "direct", {"model.nproto": 2}),
    }
    if split == "around_right":
        # the reference's own script; the paper's no-resampling row is that script too
        # (SCAN's rare filter is off in every released script: rr-spec §5.3, §9 T5)
        for key, label in (("recomb2-reference", "recomb-2 (reference recipe)"),
                           ("recomb2-noresample", "recomb-2 (no resampling)")):
            rows[key] = Run(key, data, label, "generator", {"model.nproto": 2},
                            dict(REFERENCE_SAMPLING), p_aug, presets=REFERENCE_PRESETS,
                            recipe=dict(REFERENCE_RECIPE))
    return {f"{split}-{k}": replace(r, name=f"{split}-{k}",
                                     sample={**r.sample, **kept} if r.augment == "generator" else r.sample)
            for k, r in rows.items()}


def _sig_runs(language: str, hints: int) -> dict[str, Run]:
    data = f"sigmorphon/{language}/hints-{hints}.{{seed}}"
    rare = {"resample": "rare", "rare": "auto"}
    plain = {"resample": "none"}
    rows = {
        "baseline": Run("baseline", data, "baseline", task="morphology"),
        "basic": Run("basic", data, "learned aug. (basic)", "generator",
                     {"model.nproto": 0}, {"temperature": 1.0, **plain}, task="morphology"),
        "basic-resample": Run("basic-resample", data, "+ resampling", "generator",
                              {"model.nproto": 0}, {"temperature": 1.0, **rare},
                              task="morphology"),
        "recomb1": Run("recomb1", data, "+ recomb-1", "generator", {"model.nproto": 1},
                       {"temperature": 1.0, **rare}, task="morphology"),
        "recomb1-noresample": Run("recomb1-noresample", data, "recomb-1 (no resampling)",
                                  "generator", {"model.nproto": 1},
                                  {"temperature": 1.0, **plain}, task="morphology"),
        "recomb2": Run("recomb2", data, "+ recomb-2", "generator", {"model.nproto": 2},
                       {"temperature": 0.5, **rare}, task="morphology"),
        "recomb1-vae": Run("recomb1-vae", data, "recomb-1 + VAE", "generator",
                           {"model.nproto": 1, "model.vae": True, "model.zdim": 1,
                            "model.kappa": 1.0, "model.max_norm": 1.0, "model.eps": 0.9},
                           {"temperature": 1.0, **rare}, task="morphology"),
    }
    prefix = f"{language}-h{hints}"
    return {f"{prefix}-{k}": replace(r, name=f"{prefix}-{k}") for k, r in rows.items()}


def _csl_runs(split: str) -> dict[str, Run]:
    data = f"scan/{split}"
    rows = {f"{split}-csl": Run(f"{split}-csl", data, "CSL", augment="csl", p_aug=CSL_P_AUG,
                                predictor=CSL_PREDICTOR),
            f"{split}-csl-uniform": Run(f"{split}-csl-uniform", data, "CSL (uniform rules)",
                                        augment="csl-uniform", p_aug=CSL_P_AUG,
                                        predictor=CSL_PREDICTOR)}
    if split not in SCAN_SPLITS:
        rows[f"{split}-baseline"] = Run(f"{split}-baseline", data, "baseline", predictor=CSL_PREDICTOR)
    return rows


# GeoQuery (the GECA paper's Table 2): the reference's predictor (seq2seq_geo: H 512,
# supervised copying, 150 epochs of 32 batches) at every --size, GECA's aug_ratio 0.3
GEO_SETS = ("sql-query", "sql-question", "logic-query", "logic-question")
GEO_P_AUG = 0.3
GEO_PRESETS = ("recombine_generic_cpu", "seq2seq_geo")
# a user's own data: the generic generator, the predictor sized from the data (None)
OWN_PRESETS = ("recombine_generic_cpu", None)
OWN_ROWS = ("baseline", "geca", "recomb2")


def _geo_runs(name: str) -> dict[str, Run]:
    data, task = f"geoquery/{name}", "semparse"
    rows = {"baseline": Run("baseline", data, "baseline", task=task, presets=GEO_PRESETS),
            "geca": Run("geca", data, "GECA", augment="geca", p_aug=GEO_P_AUG, task=task,
                        presets=GEO_PRESETS, geca_preset=task_of(data).geca_preset())}
    if name == "sql-query":   # rows no paper has
        rows["recomb2"] = Run("recomb2", data, "recomb-2", "generator", {"model.nproto": 2},
                              {"resample": "rare", "rare": "auto"}, GEO_P_AUG, task=task,
                              presets=GEO_PRESETS)
        rows["csl"] = Run("csl", data, "CSL", augment="csl", p_aug=GEO_P_AUG, task=task,
                          presets=GEO_PRESETS)
    return {f"geo-{name}-{k}": replace(r, name=f"geo-{name}-{k}") for k, r in rows.items()}


def check_own_rows(rows: tuple[str, ...]) -> tuple[str, ...]:
    """``rows`` if each is a row of ``own_runs`` (a SettingError before any data is read)."""
    if not rows or set(rows) - set(OWN_ROWS):
        raise SettingError(f"`rows` {','.join(rows)}: give some of {', '.join(OWN_ROWS)}")
    return rows


def own_runs(dataset: Dataset, rows: tuple[str, ...] = OWN_ROWS) -> list[Run]:
    """The rows of a user's own data set (a file or folder, read once): the predictor
    alone, with GECA's samples (the paper's semantic-parsing settings, p_aug 0.3) and with
    an R&R recomb-2 generator's resampled samples; ``own-<row>``."""
    check_own_rows(rows)
    own = {"task": "own", "presets": OWN_PRESETS, "dataset": dataset}
    data = dataset.name
    catalog = {
        "baseline": Run("own-baseline", data, "baseline", **own),
        "geca": Run("own-geca", data, "GECA", augment="geca", p_aug=GEO_P_AUG, **own),
        "recomb2": Run("own-recomb2", data, "recomb-2", "generator", {"model.nproto": 2},
                       {"resample": "rare", "rare": "auto"}, GEO_P_AUG, **own),
    }
    return [catalog[row] for row in rows]


RUNS: dict[str, Run] = {}
for _name in GEO_SETS:
    RUNS.update(_geo_runs(_name))
for _split in SCAN_SPLITS:
    RUNS.update(_scan_runs(_split))
for _split in CSL_SPLITS:
    RUNS.update(_csl_runs(_split))
for _language in SIG_LANGUAGES:
    for _hints in SIG_HINTS:
        RUNS.update(_sig_runs(_language, _hints))


def presets(run: Run, size: str) -> tuple[str, str | None]:
    """(generator preset, predictor preset) of a run at ``size`` (cpu | reference)."""
    suffix = "_cpu" if size == "cpu" else ""
    if size not in ("cpu", "reference"):
        raise SettingError(f"`size` {size}: unknown (valid: cpu, reference)")
    if run.presets:
        return run.presets
    kind = "scan" if run.task == "scan" else "sig"
    predictor = run.predictor if run.predictor and size == "cpu" else f"seq2seq_{kind}{suffix}"
    return f"recombine_{kind}{suffix}", predictor


def find_run(name: str) -> Run:
    if name not in RUNS:
        close = [n for n in RUNS if name in n][:8]
        hint = f" (did you mean: {', '.join(close)})" if close else " (see 'compgen pipeline --list')"
        raise UserError(f"pipeline {name}: unknown run{hint}")
    return RUNS[name]
