"""``[sample]`` of a generator preset: which keys it may hold.

Every key is optional; ``None`` leaves the choice to the sampler (its defaults are in
:mod:`compgen.sampling`)."""

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
    max_rounds: int | None = None      # batches decoded before giving up
