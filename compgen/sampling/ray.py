"""Sampling on a Ray cluster: rounds of prototype tuples decoded by Ray actors, merged by
the one sampling loop (``compgen.sampling.collection.collect_decoded``) in round order.

* Each actor receives the export folder's files once (one object in Ray's store), writes
  them to a private temporary folder, loads the backend (ONNX Runtime or TorchScript)
  once and removes the folder.
* The driver keeps the filters (validity, uniqueness, novelty, rare tokens, the LM) and
  the loop. Its ``decode`` hands round r to an actor and, since the prototype cycle is
  known in advance, also the next ``lookahead`` rounds, so every actor is busy while
  the driver filters. A round is the same batch of the same prototype tuples as in one
  process, and rounds are merged in order, so the accepted candidates, the stopping
  round and the N best are those of one process: the same file.
* Crossing the network: the export once per actor; per round, a start index and a
  count one way, token ids (B x L int64) and B scores back. Rounds decoded ahead of the
  stop are the only waste (at most ``lookahead``).

Random draws (temperature or mixed sampling, VAE latents) come from per-sample
counter-based streams keyed by the seed and the sample's index in the run
(``compgen.decoding.random_stream``), so they do not depend on which actor decodes a round either.

Pipeline seeds as Ray tasks: ``compgen.pipelines.ray_seeds``.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np

from compgen.data.vocab import Vocab
from compgen.device import Device
from compgen.errors import SettingError
from compgen.runtimes.artifact import load_manifest
from compgen.runtimes.manifest import Manifest
from compgen.sampling.collection import input_stop, known_input_trie, make_filter
from compgen.sampling.run import ExportDecoder, shipped_training_table
from compgen.system.ray_cluster import start_ray

RAY_BACKENDS = ("onnx", "torchscript")


class _Shard:
    """One Ray actor: an export folder's backend, loaded once."""

    def __init__(self, files: dict[str, bytes], backend: str, options):
        # the backend is loaded into memory, so the files need not outlive the loading
        # (an actor is killed with its cluster: nothing would remove them later)
        with tempfile.TemporaryDirectory(prefix="compgen-ray-export-") as tmp:
            folder = Path(tmp)
            for name, data in files.items():
                (folder / name).write_bytes(data)
            manifest = load_manifest(folder)
            # the job's filter, to stop rows whose input it rejects (as in one process)
            filt = make_filter(manifest.config, shipped_training_table(folder),
                               options.resample, options.rare)
            vocab = Vocab.load(folder / "vocab.json")
            self.decoder = ExportDecoder(folder, manifest, backend, options,
                                         input_stop(filt, vocab),
                                         known_input_trie(filt, vocab, options.novel_inputs))

    def where(self) -> str:
        return self.decoder.where

    def decode(self, idx: np.ndarray, strategy: str, temperature: float, first: int):
        rows, scores = self.decoder(idx, strategy, temperature, first)
        return np.asarray(rows, dtype=np.int64), np.asarray(scores, dtype=np.float64)


class RayDecoder:
    """``decode(prototype indices, strategy, temperature)`` over Ray actors, decoding the
    next rounds of the prototype cycle ahead of time."""

    def __init__(self, ray, actors: list, selection, lookahead: int):
        self.ray, self.actors, self.selection = ray, actors, selection
        self.lookahead = lookahead
        self.pending: dict[tuple, object] = {}
        self.turn = 0
        self.remote_seconds = 0.0

    def _dispatch(self, key):
        k, strategy, temperature, first = key
        if key not in self.pending:
            idx = self.selection.indices(first, k)
            actor = self.actors[self.turn % len(self.actors)]
            self.turn += 1
            self.pending[key] = actor.decode.remote(idx, strategy, temperature, first)

    def __call__(self, idx, strategy, temperature, first=0):
        k = len(idx)
        key = (k, strategy, temperature, first)
        for stale in [p for p in self.pending if p[1:3] != key[1:3]]:
            self.ray.cancel(self.pending.pop(stale))   # the sampler changed strategy
        for ahead in range(self.lookahead + 1):
            self._dispatch((k, strategy, temperature, first + ahead * k))
        tic = time.perf_counter()
        rows, scores = self.ray.get(self.pending.pop(key))
        self.remote_seconds += time.perf_counter() - tic
        return rows.tolist(), scores.tolist()


def check_ray_sampling(manifest: Manifest, backend: str, strategy: str) -> None:
    if backend not in RAY_BACKENDS:
        raise SettingError(f"`ray`: `backend` {backend} is not sharded (valid: "
                           f"{', '.join(RAY_BACKENDS)})")


def export_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


class RayDecoderFactory:
    """An ``ExportDecoder`` replacement for ``sample_export`` (the same call), the decoding
    sharded over ``workers`` Ray actors; ``check`` refuses what would not give the
    single-process file, before the cluster starts."""

    def __init__(self, address: str | None, workers: int, threads: int = 1,
                 lookahead: int | None = None):
        self.address, self.workers, self.threads = address, workers, threads
        self.lookahead = lookahead if lookahead is not None else 2 * workers

    check = staticmethod(check_ray_sampling)

    def __call__(self, folder, manifest, backend, options, selection) -> RayDecoder:
        ray = start_ray(self.address, self.workers)
        files = ray.put(export_files(Path(folder)))
        shard = ray.remote(num_cpus=1, num_gpus=actor_gpus(ray, options.device, self.workers))(
            _Shard)
        if options.device.cuda:   # Ray shows each actor its share as GPU 0
            options = dataclasses.replace(options, device=Device("cuda", 0))
        options = dataclasses.replace(options, threads=self.threads)
        actors = [shard.remote(files, backend, options) for _ in range(self.workers)]
        decoder = RayDecoder(ray, actors, selection, self.lookahead)
        decoder.where = f"{ray.get(actors[0].where.remote())} x {self.workers} Ray actors"
        return decoder


def actor_gpus(ray, device: Device | str, workers: int) -> float:
    """The GPUs each actor asks Ray for: none on the CPU; on CUDA the cluster's GPUs shared
    by the actors (at most one each), so that all of them start."""
    if str(device) == "cpu":
        return 0
    gpus = ray.cluster_resources().get("GPU", 0)
    if gpus < 1:
        raise SettingError(f"`device` {device} with `ray`: the Ray cluster has no GPUs; use "
                           "`device` cpu")
    return min(1.0, int(gpus) / workers)


def ray_decoder_factory(address: str | None, workers: int, threads: int = 1,
                        lookahead: int | None = None) -> RayDecoderFactory:
    return RayDecoderFactory(address, workers, threads, lookahead)
