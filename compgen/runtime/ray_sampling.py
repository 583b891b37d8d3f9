"""Sampling on a Ray cluster: rounds of prototype tuples decoded by Ray actors, merged by
the one sampling loop (``compgen.sampling.collect_decoded``) in round order.

* Each actor receives the export folder's files once (one object in Ray's store), writes
  them to a private folder and loads the backend (ONNX Runtime or TorchScript) once.
* The driver keeps the filters (validity, uniqueness, novelty, rare tokens, the LM) and
  the loop. Its ``decode`` hands round r to an actor and, since the prototype cycle is
  known in advance, also the next ``lookahead`` rounds, so every actor is busy while
  the driver filters. A round is the same batch of the same prototype tuples as in one
  process, and rounds are merged in order, so the accepted candidates, the stopping
  round and the N best are those of one process: the same file.
* Crossing the network: the export once per actor; per round, a start index and a
  count one way, token ids (B x L int64) and B scores back. Rounds decoded ahead of the
  stop are the only waste (at most ``lookahead``).

Decoding that draws random numbers (temperature or mixed sampling, VAE latents) uses one
generator per process, so it would depend on how rounds fall on actors; until the
samplers draw from per-sample counter-based streams, ``--ray`` takes greedy and beam
decoding of non-VAE exports only, and says so.

Pipeline seeds as Ray tasks: ``compgen.pipelines.ray_seeds``.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from compgen.errors import UserError

RAY_BACKENDS = ("onnx", "torchscript")


def import_ray():
    try:
        import ray
    except ImportError:
        raise UserError("--ray needs the ray package: pip install 'compgen[ray]'") from None
    return ray


def start_ray(address: str | None, workers: int):
    """Connect to ``address``, or start a local cluster with ``workers`` CPUs."""
    ray = import_ray()
    import compgen

    source = str(Path(compgen.__file__).resolve().parents[1])
    # workers import this very compgen, whatever the cluster's Python path says
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(
        p for p in (source, os.environ.get("PYTHONPATH")) if p)}}
    if not ray.is_initialized():
        kwargs = {"num_cpus": workers} if not address else {}
        ray.init(address=address or None, runtime_env=env, include_dashboard=False,
                 log_to_driver=False, configure_logging=False, **kwargs)
    return ray


class _Shard:
    """One Ray actor: an export folder's backend, loaded once."""

    def __init__(self, files: dict[str, bytes], backend: str, seed: int, threads: int):
        from compgen.export import load_manifest
        from compgen.runtime.sampler import make_decoder

        self.folder = Path(tempfile.mkdtemp(prefix="compgen-ray-export-"))
        for name, data in files.items():
            (self.folder / name).write_bytes(data)
        manifest = load_manifest(self.folder)
        self.decoder = make_decoder(self.folder, manifest, backend, seed, threads,
                                    log=lambda m: None)

    def decode(self, idx: np.ndarray, strategy: str, temperature: float):
        rows, scores = self.decoder(idx, strategy, temperature)
        return np.asarray(rows, dtype=np.int64), np.asarray(scores, dtype=np.float64)


class RayDecoder:
    """``decode(prototype indices, strategy, temperature)`` over Ray actors, decoding the
    next rounds of the prototype cycle ahead of time."""

    def __init__(self, ray, actors: list, cycle_size: int, lookahead: int):
        self.ray, self.actors, self.size = ray, actors, max(cycle_size, 1)
        self.lookahead = lookahead
        self.pending: dict[tuple, object] = {}
        self.turn = 0
        self.remote_seconds = 0.0

    def _dispatch(self, key):
        start, k, strategy, temperature = key
        if key not in self.pending:
            idx = (start + np.arange(k)) % self.size
            actor = self.actors[self.turn % len(self.actors)]
            self.turn += 1
            self.pending[key] = actor.decode.remote(idx, strategy, temperature)

    def __call__(self, idx, strategy, temperature):
        k = len(idx)
        start = int(idx[0]) if k else 0
        key = (start, k, strategy, temperature)
        for stale in [p for p in self.pending if p[2:] != key[2:]]:
            self.ray.cancel(self.pending.pop(stale))   # the sampler changed strategy
        for ahead in range(self.lookahead + 1):
            self._dispatch(((start + ahead * k) % self.size, k, strategy, temperature))
        tic = time.perf_counter()
        rows, scores = self.ray.get(self.pending.pop(key))
        self.remote_seconds += time.perf_counter() - tic
        return rows.tolist(), scores.tolist()


def check_ray_sampling(manifest: dict, backend: str, strategy: str) -> None:
    if backend not in RAY_BACKENDS:
        raise UserError(f"--ray: --backend {backend} is not sharded (valid: "
                        f"{', '.join(RAY_BACKENDS)})")
    if strategy not in ("greedy", "beam") or manifest["model"]["vae"]:
        raise UserError("--ray: only greedy and beam decoding of non-VAE exports give the "
                        "single-process file (random draws are per process); use "
                        "--strategy greedy or beam")


def export_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


class RayDecoderFactory:
    """A ``make_decoder`` replacement for ``sample_exported`` (same call), the decoding
    sharded over ``workers`` Ray actors; ``check`` refuses what would not give the
    single-process file, before the cluster starts."""

    def __init__(self, address: str | None, workers: int, threads: int = 1,
                 lookahead: int | None = None):
        self.address, self.workers, self.threads = address, workers, threads
        self.lookahead = lookahead if lookahead is not None else 2 * workers

    check = staticmethod(check_ray_sampling)

    def __call__(self, folder, manifest, backend, seed, _threads, log: Callable,
                 batch_size: int = 128, lm=None) -> RayDecoder:
        ray = start_ray(self.address, self.workers)
        files = ray.put(export_files(Path(folder)))
        shard = ray.remote(num_cpus=1)(_Shard)
        actors = [shard.remote(files, backend, seed, self.threads) for _ in range(self.workers)]
        log(f"Ray: {self.workers} actors on {ray.cluster_resources().get('CPU', 0):g} CPUs")
        return RayDecoder(ray, actors, manifest["decoding"]["prototypes"], self.lookahead)


def ray_decoder_factory(address: str | None, workers: int, threads: int = 1,
                        lookahead: int | None = None) -> RayDecoderFactory:
    return RayDecoderFactory(address, workers, threads, lookahead)
