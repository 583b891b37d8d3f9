"""GECA's candidate joins in partitions: class keys packed by their join cost so each
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
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from compgen.augment.geca.candidates import JoinTables, draw, partition_candidates, proposal_order
from compgen.errors import SettingError, UserError
from compgen.io import process_temp_folder
from compgen.system.ray_cluster import import_ray, start_ray

# bytes the joins of one partition need per template of it (measured on documentation
# text with the lm preset: about 600 B at 100k sentences; doubled for headroom)
JOIN_BYTES_PER_TEMPLATE = 1200
# bytes per row of a partition's widest join (see ``key_costs``): ten int64 columns and
# the join's hash table, doubled for headroom
JOIN_ROW_BYTES = 320
SPILL_ROW_GROUP = 50_000
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
        raise SettingError(f"`memory_budget` must be a size such as 4G, 512M or 'none' (got {text!r})")
    value = float(match.group(1)) * 1024 ** "_kmgt".index((match.group(2) or "_").lower())
    if value < 64 * 1024 ** 2:
        raise SettingError(f"`memory_budget` must be at least 64M (got {text!r})")
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
    into an exception while the folder exists, then re-raised as exit status 143); one
    left by a SIGKILL is removed by the next spill in the same parent folder."""
    parent = Path(parent) if parent is not None else None
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    # named by process id: the next spill sweeps a killed run's folder (process_temp_folder)
    folder = process_temp_folder(SPILL_PREFIX, parent)
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


def key_costs(tables: JoinTables) -> pl.DataFrame:
    """Per class key (E, own): the rows its share of a partition's joins makes. E's
    candidate join is counted on E's first key (rows of E's fragments against the T1
    classes, then of the distinct (E, T1 class) pairs against those classes' fragments:
    computed exactly, it is a small join); every key adds its templates and its own
    fragments (three span grams each, for the overlap join)."""
    a_size = tables.a_members.group_by("A").agg(pl.len().cast(pl.Int64).alias("size"))
    matches = tables.e_members.join(tables.a_members.select("A", "f"), on="f").select("E", "A")
    e_cost = (matches.group_by("E").agg(pl.len().cast(pl.Int64).alias("m"))
              .join(matches.unique().join(a_size, on="A").group_by("E")
                    .agg(pl.col("size").sum().alias("pa")), on="E")
              .select("E", (pl.col("m") + 2 * pl.col("pa")).alias("e_cost")))
    own_size = pl.DataFrame({"own": np.arange(len(tables.own_start) - 1),
                             "n_own": np.diff(tables.own_start)})
    first_of_e = pl.col("own") == pl.col("own").min().over("E")
    return (tables.templates.group_by("E", "own").agg(pl.len().cast(pl.Int64).alias("n_t"))
            .join(e_cost, on="E", how="left").join(own_size, on="own", how="left")
            .select("E", "own", (pl.when(first_of_e).then(pl.col("e_cost").fill_null(0)).otherwise(0)
                                 + pl.col("n_t") + 3 * pl.col("n_own") + 1).alias("cost"))
            .sort("E", "own"))


def assign_partitions(tables: JoinTables, n_parts: int, execution: Execution):
    """Partition of every class key (E, own) and the partition count: the keys, in (E,
    own) order, packed into partitions of about equal join cost (see ``key_costs``):
    ``n_parts`` of them for a fixed count, and under a budget as many as make each fit
    what the budget leaves (at least n_parts). Any split gives the same proposals (see
    the module doc); an E with more keys than one partition holds (a common window
    shared by thousands of templates) is cut between partitions, each reading E's
    fragment rows."""
    costs = key_costs(tables)
    total = int(costs["cost"].sum())
    per_part = max(1, math.ceil(total / n_parts))
    if execution.partitions is None and execution.memory_budget is not None:
        room = max(execution.memory_budget - current_rss_bytes(), execution.memory_budget // 8)
        per_part = max(1, min(room // JOIN_ROW_BYTES, per_part))
    packed = (pl.col("cost").cum_sum() - pl.col("cost")) // per_part
    keys = costs.select("E", "own", (packed.rank("dense") - 1).cast(pl.Int64).alias("part"))
    return keys, max(1, int(keys["part"].max() or 0) + 1)


def _split(tables: JoinTables, keys: pl.DataFrame) -> dict[int, tuple[pl.DataFrame, pl.DataFrame]]:
    """Per partition: its templates (t, E, own) and the fragment rows (E, f) of their E."""
    templates = (tables.templates.join(keys, on=["E", "own"])
                 .partition_by("part", as_dict=True, include_key=False))
    e_members = (tables.e_members.join(keys.select("E", "part").unique(), on="E")
                 .partition_by("part", as_dict=True, include_key=False))
    empty = tables.e_members.clear()
    return {int(k[0]): (frame, e_members.get(k, empty)) for k, frame in templates.items()}


def run_partition(templates, e_members, shared: dict, ok_t, variants, seed):
    """Proposals (template, fragment, index) of one partition's templates."""
    if templates.height == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    kc = partition_candidates(templates, e_members, shared["a_members"], shared["own_start"],
                              shared["own_f"], shared["frag_grams"])
    return draw(kc, ok_t, variants, seed)


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
    keys = None
    if n_parts > 1 or execution.memory_budget is not None:
        keys, n_parts = assign_partitions(tables, n_parts, execution)
    stats["partitions"] = n_parts
    shared = {"a_members": tables.a_members, "own_start": tables.own_start,
              "own_f": tables.own_f, "frag_grams": tables.frag_grams}
    if execution.ray:
        rows = _run_on_ray(tables, shared, ok_t, variants, seed, keys, execution, say)
    elif n_parts == 1:
        rows = run_partition(tables.templates, tables.e_members, shared, ok_t, variants, seed)
    else:
        rows = _run_spilled(tables, shared, ok_t, variants, seed, keys, n_parts, execution, say)
    rows_t, rows_f, sub = (np.asarray(a, np.int64) for a in rows)
    order = proposal_order(rows_t, sub, seed)
    return rows_t[order], rows_f[order]


def _run_spilled(tables, shared, ok_t, variants, seed, keys, n_parts, execution, say):
    """The partitions one after the other, their inputs written once to Parquet (the
    templates sorted by partition, the fragment rows by E) and read back per partition
    with a filter, so an E whose keys fall in many partitions is not copied for each."""
    with spill_folder(execution.spill_dir) as folder:
        t_path, e_path = folder / "templates.parquet", folder / "e_members.parquet"
        tables.templates.join(keys, on=["E", "own"]).sort("part").write_parquet(
            t_path, row_group_size=SPILL_ROW_GROUP)
        tables.e_members.sort("E").write_parquet(e_path, row_group_size=SPILL_ROW_GROUP)
        spans = (keys.group_by("part").agg(pl.col("E").min().alias("lo"), pl.col("E").max().alias("hi"))
                 .sort("part").rows())
        tables.templates = tables.e_members = None
        outputs = []
        for done, (part, lo, hi) in enumerate(spans, 1):
            templates = (pl.scan_parquet(t_path).filter(pl.col("part") == part).drop("part")
                         .collect())
            e_members = (pl.scan_parquet(e_path).filter(pl.col("E").is_between(lo, hi)).collect()
                         .filter(pl.col("E").is_in(templates["E"].unique().implode())))
            outputs.append(run_partition(templates, e_members, shared, ok_t, variants, seed))
            del templates, e_members
            if done % max(1, len(spans) // 10) == 0:
                say(f"candidate joins: partition {done:,} of {len(spans):,}")
        return _gather(outputs)


def _check_reachable(address: str) -> None:
    """Fail fast (one error line) when a cluster address does not answer."""
    target = address.split("://", 1)[-1]
    host, _, port = target.rpartition(":")
    if not host or not port.isdigit():
        raise SettingError(f"`ray`: expected 'local' or HOST:PORT (got {address!r})")
    try:
        socket.create_connection((host, int(port)), timeout=RAY_CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise SettingError(f"`ray` {address}: cannot connect within {RAY_CONNECT_TIMEOUT_S:.0f} s "
                           f"({exc.strerror or exc})") from None


def check_execution(execution: Execution) -> None:
    """Option errors before any work: the budget, Ray importable, the address answering."""
    if execution.memory_budget is not None and execution.memory_budget < 64 * 1024 ** 2:
        raise SettingError(f"`memory_budget` must be at least 64M "
                           f"(got {execution.memory_budget} bytes)")
    if execution.partitions is not None and execution.partitions < 1:
        raise UserError(f"partitions must be >= 1 (got {execution.partitions})")
    if execution.shards is not None and execution.shards < 1:
        raise UserError(f"shards must be >= 1 (got {execution.shards})")
    if execution.ray:
        import_ray()
        if execution.ray != "local":
            _check_reachable(execution.ray)


def _run_on_ray(tables, shared, ok_t, variants, seed, keys, execution, say):
    ray = import_ray()
    address = None if execution.ray == "local" else execution.ray
    started_here = not ray.is_initialized()
    workers = execution.ray_workers or os.cpu_count() or 1
    try:
        ray = start_ray(address, workers)
        task = ray.remote(num_cpus=1)(run_partition)
        shared_ref = ray.put(shared)
        ok_ref = ray.put(ok_t)
        futures = [task.remote(templates, e_members, shared_ref, ok_ref, variants, seed)
                   for templates, e_members in _split(tables, keys).values()]
        tables.templates = tables.e_members = None
        say(f"candidate joins: {len(futures):,} Ray tasks")
        return _gather(ray.get(futures))
    finally:
        if started_here and ray.is_initialized():
            ray.shutdown()
