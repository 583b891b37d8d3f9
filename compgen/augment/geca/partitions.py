"""GECA's candidate joins in partitions: split by a hash of the environment class so each
partition's joins fit a memory budget, spilled to Parquet in a temporary folder that is
always removed, or run as Ray tasks.

A template's candidates depend only on its class key (E, own) (see
``candidates.partition_candidates``) and its draws only on the seed, its id and those
candidates (``candidates.draw``), so the proposals of any split, put in
``proposal_order``, are those of one partition: the output is the same for every
partition count, spilled or not, in one process or on Ray.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import signal
import socket
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from compgen.augment.geca.candidates import JoinTables, draw, partition_candidates, proposal_order
from compgen.errors import UserError

# bytes the joins of one partition need per template of it (measured on documentation
# text with the lm preset: about 600 B at 100k sentences; doubled for headroom)
JOIN_BYTES_PER_TEMPLATE = 1200
DEFAULT_RAM_SHARE = 0.25          # default budget: this share of the machine's RAM
MAX_PARTITIONS = 4096
RAY_CONNECT_TIMEOUT_S = 15.0
SPILL_PREFIX = "compgen-geca-spill-"

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


@dataclass
class Execution:
    """How extraction and the candidate joins run (never what they give).

    ``memory_budget`` bytes for the whole process (None: one partition, in memory);
    ``partitions`` a fixed partition count of the joins (None: from the budget);
    ``shards`` a fixed count of example ranges for extraction and realisation (None:
    from the budget; see ``shards``); ``spill_dir`` where
    the temporary Parquet folder goes (None: TMPDIR); ``ray`` None, "local" or a cluster
    address; ``ray_workers`` CPUs of a local Ray cluster (None: all)."""
    memory_budget: int | None = None
    partitions: int | None = None
    shards: int | None = None
    spill_dir: str | os.PathLike | None = None
    ray: str | None = None
    ray_workers: int | None = None


def machine_ram_bytes() -> int:
    with open("/proc/meminfo") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    raise OSError("/proc/meminfo has no MemTotal")


def default_memory_budget() -> int:
    return int(machine_ram_bytes() * DEFAULT_RAM_SHARE)


def parse_memory_budget(text: str | None) -> int | None:
    """``4G``, ``512M``, ``1.5GB``, ``300000000`` -> bytes; ``none`` -> None (one in-memory
    partition); None -> the default (a share of the machine's RAM)."""
    if text is None:
        return default_memory_budget()
    if text.strip().lower() in ("none", "off"):
        return None
    match = _SIZE.match(text)
    if not match:
        raise UserError(f"--memory-budget must be a size such as 4G, 512M or 'none' (got {text!r})")
    value = float(match.group(1)) * 1024 ** "_kmgt".index((match.group(2) or "_").lower())
    if value < 64 * 1024 ** 2:
        raise UserError(f"--memory-budget must be at least 64M (got {text!r})")
    return int(value)


def current_rss_bytes() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def partition_count(n_templates: int, execution: Execution) -> int:
    """Partitions whose joins fit in what the budget leaves beside the process's present
    memory (at least an eighth of the budget is assumed left)."""
    if execution.partitions is not None:
        return max(1, execution.partitions)
    if execution.memory_budget is None:
        return 1
    room = max(execution.memory_budget - current_rss_bytes(), execution.memory_budget // 8)
    need = n_templates * JOIN_BYTES_PER_TEMPLATE
    return min(MAX_PARTITIONS, max(1, math.ceil(need / room)))


class _Terminated(BaseException):
    """SIGTERM, raised in the main thread so that cleanup code runs."""


@contextlib.contextmanager
def spill_folder(parent: str | os.PathLike | None = None):
    """A temporary folder removed on success, on error, on Ctrl-C and on SIGTERM (turned
    into an exception while the folder exists, then re-raised as exit status 143)."""
    parent = Path(parent) if parent is not None else None
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=SPILL_PREFIX, dir=parent))
    previous = None
    main = threading.current_thread() is threading.main_thread()
    if main:
        def on_term(signum, frame):
            raise _Terminated()
        previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield folder
    except _Terminated:
        shutil.rmtree(folder, ignore_errors=True)
        raise SystemExit(128 + signal.SIGTERM) from None
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if main:
            signal.signal(signal.SIGTERM, previous)


def _part_column(frame: pl.DataFrame, n_parts: int) -> pl.DataFrame:
    return frame.with_columns((pl.col("E").hash(seed=58) % n_parts).alias("part"))


def _split(frame: pl.DataFrame, n_parts: int) -> dict[int, pl.DataFrame]:
    parts = _part_column(frame, n_parts).partition_by("part", as_dict=True, include_key=False)
    return {int(k[0]): v for k, v in parts.items()}


def run_partition(templates, e_members, shared: dict, ok_t, variants, seed):
    """Proposals (template, fragment, index) of one partition's templates."""
    if templates.height == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    cand, t_key = partition_candidates(templates, e_members, shared["a_members"],
                                       shared["own_members"], shared["grams"])
    n_keys = int(t_key["key"].max()) + 1 if t_key.height else 0
    return draw(cand, t_key, ok_t, n_keys, variants, seed)


def _gather(outputs) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    outputs = list(outputs)
    if not outputs:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    return tuple(np.concatenate([o[i] for o in outputs]).astype(np.int64) for i in range(3))


def candidate_proposals(tables: JoinTables, ok_t: np.ndarray, variants, seed: int,
                        execution: Execution, stats: dict, say=lambda msg: None):
    """Every proposal (template, fragment) in the global proposal order, computed in
    partitions (see the module doc). ``tables`` is emptied on the way (so its memory
    can be freed while the partitions run)."""
    n_parts = partition_count(tables.templates.height, execution)
    if execution.ray:
        workers = execution.ray_workers or os.cpu_count() or 1
        n_parts = max(n_parts, workers)
    stats["partitions"] = n_parts
    shared = {"a_members": tables.a_members, "own_members": tables.own_members,
              "grams": tables.grams}
    if execution.ray:
        rows = _run_on_ray(tables, shared, ok_t, variants, seed, n_parts, execution, say)
    elif n_parts == 1:
        rows = run_partition(tables.templates, tables.e_members, shared, ok_t, variants, seed)
    else:
        rows = _run_spilled(tables, shared, ok_t, variants, seed, n_parts, execution, say)
    rows_t, rows_f, sub = (np.asarray(a, np.int64) for a in rows)
    order = proposal_order(rows_t, sub, seed)
    return rows_t[order], rows_f[order]


def _run_spilled(tables, shared, ok_t, variants, seed, n_parts, execution, say):
    with spill_folder(execution.spill_dir) as folder:
        for name in ("templates", "e_members"):
            for part, frame in _split(getattr(tables, name), n_parts).items():
                frame.write_parquet(folder / f"{name}-{part}.parquet")
        tables.templates = None
        empty_members = tables.e_members.clear()
        tables.e_members = None
        outputs = []
        for part in range(n_parts):
            paths = [folder / f"{name}-{part}.parquet" for name in ("templates", "e_members")]
            if not paths[0].exists():
                continue
            templates = pl.read_parquet(paths[0])
            e_members = pl.read_parquet(paths[1]) if paths[1].exists() else empty_members
            outputs.append(run_partition(templates, e_members, shared, ok_t, variants, seed))
            del templates, e_members
            if (part + 1) % max(1, n_parts // 10) == 0:
                say(f"candidate joins: partition {part + 1:,} of {n_parts:,}")
        return _gather(outputs)


def _check_reachable(address: str) -> None:
    """Fail fast (one error line) when a cluster address does not answer."""
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"--ray: expected 'local' or HOST:PORT (got {address!r})")
    try:
        socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise UserError(f"--ray {address}: cannot connect within {RAY_CONNECT_TIMEOUT_S:.0f} s "
                        f"({exc.strerror or exc})") from None


def check_execution(execution: Execution) -> None:
    """Option errors before any work: the budget, Ray importable, the address answering."""
    if execution.memory_budget is not None and execution.memory_budget < 64 * 1024 ** 2:
        raise UserError(f"--memory-budget must be at least 64M (got {execution.memory_budget} bytes)")
    if execution.partitions is not None and execution.partitions < 1:
        raise UserError(f"partitions must be >= 1 (got {execution.partitions})")
    if execution.shards is not None and execution.shards < 1:
        raise UserError(f"shards must be >= 1 (got {execution.shards})")
    if execution.ray:
        from compgen.ray_cluster import import_ray

        import_ray()
        if execution.ray != "local":
            _check_reachable(execution.ray)


def _run_on_ray(tables, shared, ok_t, variants, seed, n_parts, execution, say):
    from compgen.ray_cluster import import_ray, start_ray

    ray = import_ray()
    address = None if execution.ray == "local" else execution.ray
    started_here = not ray.is_initialized()
    workers = execution.ray_workers or os.cpu_count() or 1
    try:
        ray = start_ray(address, workers)
        task = ray.remote(num_cpus=1)(run_partition)
        shared_ref = ray.put(shared)
        ok_ref = ray.put(ok_t)
        e_parts = _split(tables.e_members, n_parts)
        empty_members = tables.e_members.clear()
        futures = [task.remote(frame, e_parts.get(part, empty_members), shared_ref, ok_ref,
                               variants, seed)
                   for part, frame in _split(tables.templates, n_parts).items()]
        tables.templates = tables.e_members = None
        say(f"candidate joins: {len(futures):,} Ray tasks")
        return _gather(ray.get(futures))
    finally:
        if started_here and ray.is_initialized():
            ray.shutdown()
