"""The options of one sampling job, resolved once: what the caller (``compgen sample``,
``compgen pipeline``, a test) asked for, else the generator preset's ``[sample]`` table,
else the defaults below; checked here, for every backend, before any work starts."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from compgen.decoding.contract import BEAM_WIDTH, check_strategy
from compgen.decoding.random_stream import check_seed
from compgen.errors import UserError
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


def check_temperature(temperature: float, option: str = "--temperature") -> float:
    """A finite temperature >= MIN_TEMPERATURE, else a UserError."""
    if not (isinstance(temperature, int | float) and math.isfinite(temperature)
            and temperature >= MIN_TEMPERATURE):
        raise UserError(f"{option} {temperature}: must be a finite number >= "
                        f"{MIN_TEMPERATURE:g}")
    return float(temperature)


@dataclass(frozen=True)
class SampleOptions:
    strategy: str = "greedy"
    n: int = 400                    # samples kept: the n most probable of nsamples accepted
    nsamples: int = 400
    temperature: float = 1.0
    beam_width: int = BEAM_WIDTH
    batch_size: int = 128           # prototype tuples decoded per round
    max_rounds: int = MAX_ROUNDS    # 0 (NO_ROUND_CAP): no cap
    resample: str = "none"
    rare: str | None = None
    rare_prototypes: bool | None = None  # None: exports with --resample rare draw only
    #                                      tuples holding the rare phrase; checkpoints all
    prototype_cut: str = "mean"
    raise_temperature: bool = False
    test_dropout: bool | None = None  # eager only; None = the checkpoint's outdrop_test
    seed: int = 0
    threads: int | None = None
    precision: str = "fp32"         # exports: fp32 | bf16 | int8 (compgen.system.precision)
    device: str = "cpu"             # resolved by compgen.device (sample() resolves auto)

    @classmethod
    def resolve(cls, config: dict, **asked) -> SampleOptions:
        """``asked`` (None = not given) over the preset's ``[sample]`` over the defaults.
        ``nsamples`` left unset scales with ``n`` as in the preset (400 of 500 -> 800 of
        1000 for --n 800)."""
        names = {f.name for f in fields(cls)}
        unknown = set(asked) - names
        if unknown:
            raise TypeError(f"unknown sampling options: {', '.join(sorted(unknown))}")
        preset = config.get("sample", {})
        value = {name: asked.get(name) for name in names}
        for name in names - {"nsamples", "seed", "threads", "test_dropout", "precision",
                             "device"}:
            if value[name] is None and name in preset:
                value[name] = preset[name]
        defaults = cls()
        for name in names - {"nsamples"}:
            if value[name] is None:
                value[name] = getattr(defaults, name)
        n = int(value["n"])
        if value["nsamples"] is None:
            value["nsamples"] = max(n, round(n * int(preset.get("nsamples", n))
                                            / int(preset.get("n", n))))
        options = cls(**{**value, "n": n, "nsamples": int(value["nsamples"]),
                         "temperature": float(value["temperature"]),
                         "beam_width": int(value["beam_width"]),
                         "batch_size": int(value["batch_size"]),
                         "max_rounds": int(value["max_rounds"]),
                         "rare_prototypes": (None if value["rare_prototypes"] is None
                                             else bool(value["rare_prototypes"])),
                         "raise_temperature": bool(value["raise_temperature"])})
        options.check()
        return options

    def check(self) -> None:
        check_strategy(self.strategy)
        for name in ("n", "batch_size", "beam_width"):
            if getattr(self, name) < 1:
                raise UserError(f"--{name.replace('_', '-')} must be >= 1")
        check_max_rounds(self.max_rounds)
        if self.threads is not None and self.threads < 1:
            raise UserError("--threads must be >= 1")
        if self.nsamples < self.n:
            raise UserError(f"--nsamples {self.nsamples} must be >= --n {self.n} (the n most "
                            "probable of nsamples are kept)")
        check_temperature(self.temperature)
        check_seed(self.seed)
        if self.precision not in SAMPLE_PRECISIONS:
            raise UserError(f"--precision {self.precision}: unknown (valid: "
                            f"{', '.join(SAMPLE_PRECISIONS)})")
        if self.prototype_cut not in PROTOTYPE_CUTS:
            raise UserError(f"--prototype-cut {self.prototype_cut}: unknown (valid: "
                            f"{', '.join(PROTOTYPE_CUTS)})")
        if self.resample not in RESAMPLE:
            raise UserError(f"--resample {self.resample}: unknown (valid: {', '.join(RESAMPLE)})")


def check_max_rounds(max_rounds: int | None) -> None:
    """``--max-rounds``: a positive cap, or 0 for none (None: not given)."""
    if max_rounds is not None and max_rounds < 0:
        raise UserError(f"--max-rounds must be >= 0 (0: no cap, decode until --nsamples are "
                        f"accepted), not {max_rounds}")
