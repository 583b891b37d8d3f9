"""Ray: the import with a one-line error when it is missing, and a connection to a
cluster (or a local one) whose workers import this very compgen. Shared by every layer
that runs Ray tasks (GECA's partitions, sampling, pipeline seeds)."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
from pathlib import Path

from compgen.errors import SettingError
from compgen.io import quiet_native_stderr


def import_ray():
    try:
        # optional: ray is an extra (compgen[ray])
        import ray
    except ImportError:
        raise SettingError("`ray` needs the ray package: pip install 'compgen[ray]'") from None
    return ray


CONNECT_TIMEOUT_S = 5.0
# a Ray head (its GCS, or the Ray Client server of ray://) is a gRPC server: HTTP/2, whose
# first frame after the client's connection preface is a SETTINGS frame
HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(3) + b"\x04" + bytes(5)
SETTINGS_FRAME = 0x04


def check_reachable(address: str | None, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """A SettingError unless ``host:port`` (or ``ray://host:port``) accepts a TCP connection
    and answers as a gRPC server within ``timeout`` seconds: Ray itself retries an
    unreachable head for minutes, and one that is some other server for half a minute."""
    if not address or address in ("auto", "local"):
        return
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not port.isdigit():
        return   # a form Ray resolves itself
    try:
        connection = socket.create_connection((host.strip("[]"), int(port)), timeout=timeout)
    except socket.gaierror:
        raise SettingError(f"`ray` {address}: unknown host {host!r}") from None
    except OSError as exc:
        reason = "no answer" if isinstance(exc, TimeoutError) else exc.strerror or str(exc)
        raise SettingError(f"`ray` {address}: cannot connect within {timeout:g} s ({reason})"
                           ) from None
    with connection:
        # a TLS-only cluster answers nothing to plain HTTP/2: Ray's own checks decide there
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return
        if not _answers_http2(connection, timeout):
            raise SettingError(f"`ray` {address}: a server answers there, but not as a Ray "
                               "head (no gRPC); give the address `ray start --head` printed"
                               ) from None


def _answers_http2(connection, timeout: float) -> bool:
    connection.settimeout(timeout)
    head = b""
    try:
        connection.sendall(HTTP2_PREFACE)
        while len(head) < 9:   # a frame header: length (3), type (1), flags (1), stream (4)
            chunk = connection.recv(9 - len(head))
            if not chunk:
                return False
            head += chunk
    except OSError:
        return False
    return head[3] == SETTINGS_FRAME


def start_ray(address: str | None, workers: int):
    """Connect to ``address``, or start a local cluster with ``workers`` CPUs."""
    ray = import_ray()
    check_reachable(address)
    source = str(Path(__file__).resolve().parents[2])   # the folder holding this compgen
    # workers import this very compgen, whatever the cluster's Python path says
    env = {"env_vars": {"PYTHONPATH": os.pathsep.join(
        p for p in (source, os.environ.get("PYTHONPATH")) if p)}}
    # Ray says on every start that token authentication (its default) is on: not a line
    # for compgen's users, who did not choose it
    logging.getLogger("ray._private.authentication.authentication_token_setup").setLevel(
        logging.ERROR)
    if not ray.is_initialized():
        kwargs = {"num_cpus": workers} if not address else {}

        # connecting, Ray's C++ client logs every retry straight to fd 2
        quiet = quiet_native_stderr() if address else contextlib.nullcontext()
        try:
            with quiet:
                ray.init(address=address or None, runtime_env=env, include_dashboard=False,
                         log_to_driver=False, configure_logging=False, **kwargs)
        except ConnectionError as exc:   # an answer that is no Ray head
            raise SettingError(f"`ray` {address}: {str(exc).strip().splitlines()[0]}") from None
    return ray
