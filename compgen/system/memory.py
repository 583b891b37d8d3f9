"""Address-space limits (``ulimit -v``): refused up front, because Polars (Rust) aborts the
process when an allocation fails, which no Python handler can turn into an error line.

torch and Polars reserve about 1.6 GB of address space when they are imported, before any
data is read (measured: VmSize 1.58 GB after ``import polars, torch``); the smallest
generator training (SCAN jump, recombine_scan_cpu) needs 2.6 GB under a limit. Between 2.0 and
2.4 GB it fails in places that cannot be reported cleanly (an import, a Rust panic), and
below 2.0 GB it aborts inside Polars."""

from __future__ import annotations

import resource
from pathlib import Path

from compgen.errors import UserError

MIN_ADDRESS_SPACE = int(2.5 * 1024**3)   # below this, failures cannot all become error lines


def address_space_limit() -> int | None:
    limit = resource.getrlimit(resource.RLIMIT_AS)[0]
    return None if limit == resource.RLIM_INFINITY else limit


def gigabytes(n: float) -> str:
    return f"{n / 1024**3:.2f} GB"


def check_address_space() -> None:
    """A limit too low for torch + Polars to start: one error line before any work."""
    limit = address_space_limit()
    if limit is not None and limit < MIN_ADDRESS_SPACE:
        raise UserError(f"the address-space limit (ulimit -v) is {gigabytes(limit)}; compgen needs "
                        f"at least {gigabytes(MIN_ADDRESS_SPACE)} (torch and Polars reserve about "
                        "1.6 GB before reading data): raise it")


def _mapped_bytes() -> int:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def check_headroom(need: int, what: str) -> None:
    """Before a Polars read of about ``need`` bytes: an error line if the address-space limit
    leaves less room than that (instead of an abort inside Polars)."""
    limit = address_space_limit()
    if limit is None:
        return
    room = limit - _mapped_bytes()
    if need > room:
        raise UserError(f"{what} needs about {gigabytes(need)} of memory but the address-space "
                        f"limit (ulimit -v) of {gigabytes(limit)} leaves {gigabytes(max(room, 0))}: "
                        "raise it or use a smaller data set")
