"""Ray: the import with a one-line error when it is missing, and a connection to a
cluster (or a local one) whose workers import this very compgen. Shared by every layer
that runs Ray tasks (GECA's partitions, sampling, pipeline seeds)."""

from __future__ import annotations

import os
from pathlib import Path

from compgen.errors import UserError


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
