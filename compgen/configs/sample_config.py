"""``[sample]`` of a generator preset: which keys it may hold, and their types.

Every key is optional; ``None`` leaves the choice to the sampler: the preset's values are
resolved with the caller's options by :class:`compgen.sampling.options.SampleOptions`
(which also holds the defaults), and ``novel`` is read by the sampling filter."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SampleConfig:
    strategy: str | None = None        # greedy | temperature | mixed | beam
    beam_width: int | None = None
    temperature: float | None = None
    n: int | None = None               # examples kept
    nsamples: int | None = None        # accepted before keeping the n most probable
    batch_size: int | None = None
    novel: bool | None = None          # drop samples that are training examples
    resample: str | None = None        # none | rare
    rare: str | None = None            # the rare-token rule (jump, auto, ...)
    rare_prototypes: bool | None = None
    prototype_cut: str | None = None   # SCAN Omega's length cut: mean | mean+std | none
    max_rounds: int | None = None      # batches decoded before giving up
    raise_temperature: bool | None = None  # greedy/beam -> mixed, then hotter, when stuck
