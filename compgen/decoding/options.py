"""The options of one sampling job, as one typed object built and checked once.

A generator preset's ``[sample]`` table holds the same settings (all but the per-run
ones of ``RUN_ONLY``) and is read into this class too, strictly
(``compgen.configs.read_section``). A job's options are what the caller (``compgen
sample``, ``compgen pipeline``, the Python API, a test) asked for, else the preset's,
else ``DEFAULTS``: ``SampleOptions(preset=config["sample"], temperature=0.7, ...)``;
ranges, names and combinations are checked when it is built, for every backend, before
any work starts. The object is then handed whole to the sampler and its backend."""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import InitVar, dataclass, fields

from compgen.decoding.contract import BEAM_WIDTH, check_strategy
from compgen.decoding.random_stream import check_seed
from compgen.device import DEVICE_ENV, Device, check_threads
from compgen.errors import SettingError
from compgen.system.precision import SAMPLE_PRECISIONS

MAX_ROUNDS = 200  # batches decoded at most before the sampler gives up with fewer accepted
NO_ROUND_CAP = 0  # max_rounds 0: rounds until nsamples are accepted (the reference's loop)
RESAMPLE = ("none", "rare")
# SCAN Omega keeps prototypes no longer than the training prototypes' mean length (the
# reference's code), mean + std (the paper's text) or of any length (none; not in the
# reference): compgen.neighborhoods.scan_omega
PROTOTYPE_CUTS = ("mean", "mean+std", "none")
# log-probabilities divided by a smaller temperature overflow to -inf (NaN draws)
MIN_TEMPERATURE = 1e-6
# the most each count or width may be (the C++ runner's job reader, cpp_runner/src/job.hpp,
# holds the same bounds): a beam of 1,000 already takes minutes a sample and 10^6 aborted
# the C++ runner; a batch keeps batch_size x beam_width decoder rows in memory at once;
# counts beyond 2^40 cannot be decoded in any lifetime and lose their exactness on the
# way to the runner (2^70 arrived there as a negative number)
UPPER_BOUNDS = {"beam_width": (1024, "a wider beam takes minutes a sample, its rows outgrow memory"),
                "batch_size": (65536, "a batch keeps batch_size x beam_width rows in memory"),
                "n": (2**40, "more samples than can be decoded"),
                "nsamples": (2**40, "more samples than can be decoded"),
                "max_rounds": (2**40, "more rounds than can be decoded")}
# settings of one run on one machine: never read from a preset
RUN_ONLY = ("seed", "threads", "test_dropout", "precision", "device")
# what a setting left unset (None) by the caller and the preset becomes
DEFAULTS = {"strategy": "greedy", "n": 400, "temperature": 1.0, "beam_width": BEAM_WIDTH,
            "batch_size": 128, "max_rounds": MAX_ROUNDS, "resample": "none",
            "prototype_cut": "mean", "raise_temperature": False, "seed": 0,
            "precision": "fp32", "device": "cpu", "novel_inputs": False}


class OptionError(SettingError):
    """A sampling setting out of range or unknown (a ValueError too: a preset's reader,
    ``compgen.configs.read_section``, names the file and section before it)."""


def check_temperature(temperature: float, setting: str = "temperature") -> float:
    """A finite temperature >= MIN_TEMPERATURE, else an OptionError."""
    if not (isinstance(temperature, int | float) and math.isfinite(temperature)
            and temperature >= MIN_TEMPERATURE):
        raise OptionError(f"`{setting}` {temperature}: must be a finite number >= "
                          f"{MIN_TEMPERATURE:g}")
    return float(temperature)


@dataclass(frozen=True)
class SampleOptions:
    """None: the preset's value, else ``DEFAULTS`` (filled in when the object is built)."""
    preset: InitVar[Mapping | None] = None   # a generator's [sample] table
    strategy: str | None = None           # greedy | temperature | mixed | beam
    n: int | None = None                  # samples kept: the n most probable of nsamples
    # accepted before the n are kept; unset, it scales with n as in the preset (400 of
    # 500 -> 800 of 1000 for n 800)
    nsamples: int | None = None
    temperature: float | None = None
    beam_width: int | None = None
    batch_size: int | None = None         # prototype tuples decoded per round
    max_rounds: int | None = None         # 0 (NO_ROUND_CAP): no cap
    novel: bool | None = None             # drop training pairs (None: SCAN yes, else no)
    # mask <sep> where the input so far is a training input (compgen.decoding.input_trie):
    # fewer candidates thrown away by the novelty filter, a different distribution
    novel_inputs: bool | None = None
    resample: str | None = None           # none | rare
    rare: str | None = None               # the rare-token rule (jump, auto, PST,FUT, ...)
    rare_prototypes: bool | None = None   # None: exports with resample rare draw only
    #                                       tuples holding the rare phrase; checkpoints all
    prototype_cut: str | None = None      # SCAN Omega's length cut: mean | mean+std | none
    raise_temperature: bool | None = None  # greedy/beam -> mixed, then hotter, when stuck
    test_dropout: bool | None = None      # eager only; None = the checkpoint's outdrop_test
    seed: int | None = None
    threads: int | None = None
    precision: str | None = None          # exports: fp32 | bf16 | int8
    device: str | Device | None = None    # the sampling entry resolves it to a Device

    def __post_init__(self, preset: Mapping | None) -> None:
        preset = preset or {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name not in RUN_ONLY and f.name != "nsamples":
                value = preset.get(f.name)
            if value is None and not (f.name == "device" and os.environ.get(DEVICE_ENV, "").strip()):
                # an unset device with $COMPGEN_DEVICE set stays unset: compgen.device reads
                # (and checks) the variable, naming it
                value = DEFAULTS.get(f.name)
            object.__setattr__(self, f.name, value)
        n = _typed("n", self.n, int)
        if self.nsamples is None:
            object.__setattr__(self, "nsamples", max(n, round(
                n * int(preset.get("nsamples", n)) / int(preset.get("n", n)))))
        for name, kind in (("n", int), ("nsamples", int), ("temperature", float),
                           ("beam_width", int), ("batch_size", int), ("max_rounds", int),
                           ("raise_temperature", bool), ("seed", int), ("novel_inputs", bool)):
            object.__setattr__(self, name, _typed(name, getattr(self, name), kind))
        for name in ("rare_prototypes", "novel", "test_dropout"):
            if getattr(self, name) is not None:
                _typed(name, getattr(self, name), bool)
        self._check()

    @classmethod
    def resolve(cls, config: Mapping, **asked) -> SampleOptions:
        """``asked`` (None = not given) over the generator ``config``'s ``[sample]``."""
        return cls(config.get("sample", {}), **asked)

    def _check(self) -> None:
        check_strategy(self.strategy)
        check_seed(self.seed)
        for name in ("n", "batch_size", "beam_width"):
            if getattr(self, name) < 1:
                raise OptionError(f"`{name}` must be >= 1")
        check_max_rounds(self.max_rounds)
        for name, (bound, why) in UPPER_BOUNDS.items():
            if getattr(self, name) > bound:
                raise OptionError(f"`{name}` {getattr(self, name)}: too large (at most "
                                  f"{bound:,}: {why})")
        check_threads(self.threads)
        if self.nsamples < self.n:
            raise OptionError(f"`nsamples` {self.nsamples} must be >= `n` {self.n} (the n "
                              "most probable of nsamples are kept)")
        check_temperature(self.temperature)
        if self.novel_inputs and self.strategy == "beam":
            raise OptionError("`novel_inputs`: greedy, temperature or mixed sampling only "
                              "(not `strategy` beam)")
        if self.precision not in SAMPLE_PRECISIONS:
            raise OptionError(f"`precision` {self.precision}: unknown (valid: "
                              f"{', '.join(SAMPLE_PRECISIONS)})")
        if self.prototype_cut not in PROTOTYPE_CUTS:
            raise OptionError(f"`prototype_cut` {self.prototype_cut}: unknown (valid: "
                              f"{', '.join(PROTOTYPE_CUTS)})")
        if self.resample not in RESAMPLE:
            raise OptionError(f"`resample` {self.resample}: unknown (valid: "
                              f"{', '.join(RESAMPLE)})")


def _typed(name: str, value, kind):
    """``value`` as ``kind`` when it is one (an int for a float), else an OptionError: 2.9
    samples, a temperature 'hot' or raise_temperature 'no' are mistakes, not 2, or True."""
    if isinstance(value, bool) != (kind is bool):
        pass
    elif kind is bool or (kind is int and isinstance(value, int)):
        return value
    elif kind is float and isinstance(value, int | float):
        return float(value)
    noun = {bool: "true or false", int: "an integer", float: "a number"}[kind]
    raise OptionError(f"`{name}` {value!r}: must be {noun}")


def check_max_rounds(max_rounds: int | None) -> None:
    """``max_rounds``: a positive cap, or 0 for none (None: not given)."""
    if max_rounds is not None and max_rounds < 0:
        raise OptionError(f"`max_rounds` must be >= 0 (0: no cap, decode until `nsamples` "
                          f"are accepted), not {max_rounds}")
