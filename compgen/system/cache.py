"""The user's cache (``~/.cache/compgen``) as a verified store: every artefact built there
(the C++ runner, compiled libraries, optimised ONNX graphs, the compiled training loops,
passed-check records) carries a digest recorded when it was built, and is checked against
it before it is loaded or executed. An entry whose bytes no longer match (edited, planted,
truncated by a full disk), or that has no record, is removed and built again, with one
line saying so. Builds hold a lock (``flock``: the kernel drops it when its holder dies, so
a killed build never blocks the next one). The cache folder is private (0700)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

from compgen.io import atomic_open, user_cache

CHUNK = 1 << 20
RECORD_SUFFIX = ".sha256"   # beside the entry: ``NAME.sha256`` holds its digest


def store(name: str) -> Path:
    """``~/.cache/compgen/<name>``, created with the cache root private (0700)."""
    folder = user_cache(name)
    root = folder.parent
    if not root.is_dir():
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(root, 0o700)   # mkdir's mode passes through the umask
    folder.mkdir(mode=0o700, exist_ok=True)
    return folder


def file_digest(path: Path, digest=None):
    """sha256 of a file read in chunks (a large file is never read whole)."""
    digest = digest or hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest


def digest(path: Path) -> str:
    """sha256 of a file, or of a folder: every file's relative name and bytes, in order
    (a link inside the folder counts as its name and target, never followed)."""
    path = Path(path)
    if not path.is_dir():
        return file_digest(path).hexdigest()
    h = hashlib.sha256()
    for item in sorted(path.rglob("*")):
        name = item.relative_to(path).as_posix()
        if item.is_symlink():
            h.update(f"link {name} {os.readlink(item)}\0".encode())
        elif item.is_file():
            h.update(f"file {name}\0".encode())
            file_digest(item, h)
    return h.hexdigest()


def record_path(entry: Path) -> Path:
    return entry.with_name(entry.name + RECORD_SUFFIX)


def record(entry: Path, extra: dict | None = None) -> None:
    """Record ``entry``'s digest (once it is complete and in place)."""
    data = {"sha256": digest(entry), **(extra or {})}
    with atomic_open(record_path(entry), "w", encoding="utf-8") as out:
        json.dump(data, out)


def recorded(entry: Path) -> dict | None:
    try:
        data = json.loads(record_path(entry).read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("sha256"), str) else None


def remove(entry: Path) -> None:
    """Remove an entry and its record (a file, a link or a folder)."""
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            entry.unlink()
    with contextlib.suppress(FileNotFoundError):
        record_path(entry).unlink()


def notice(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


def verified(entry: Path, what: str) -> bool:
    """True when ``entry`` exists and matches its recorded digest. An entry that exists but
    does not match (or has no record) is removed, with a notice, so the caller builds it
    again; False then, and False when there is nothing."""
    entry = Path(entry)
    if not entry.exists() and not entry.is_symlink():
        with contextlib.suppress(FileNotFoundError):
            record_path(entry).unlink()
        return False
    data = recorded(entry)
    if data is not None and not entry.is_symlink() and digest(entry) == data["sha256"]:
        return True
    notice(f"{what} in the cache ({entry}) does not match its recorded digest "
           "(edited, planted or incomplete); building it again")
    remove(entry)
    return False


def verified_bytes(entry: Path, what: str) -> bytes | None:
    """The bytes of a file entry when they match its record (read once, so what is checked
    is what is used), else None (a mismatching entry is removed, with a notice)."""
    entry = Path(entry)
    data = recorded(entry)
    if data is None or entry.is_symlink() or not entry.is_file():
        verified(entry, what)
        return None
    content = entry.read_bytes()
    if hashlib.sha256(content).hexdigest() == data["sha256"]:
        return content
    verified(entry, what)
    return None


def copy_hashing(source: Path, target: Path, digest=None):
    """Copy a file to ``target`` (created private, 0600), feeding the bytes copied to
    ``digest`` (a new sha256 unless given): what is checked is what was copied."""
    digest = digest or hashlib.sha256()
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with open(source, "rb") as src, os.fdopen(fd, "wb") as out:
        while chunk := src.read(CHUNK):
            digest.update(chunk)
            out.write(chunk)
    return digest


def checked_copy(entry: Path, target: Path) -> bool:
    """Copy a file or folder entry to ``target`` (which must not exist), hashing the
    bytes as they are copied (``digest``'s rule): True when they match the entry's record,
    so a file swapped in after a check is never what runs; else the copy is removed and
    False (the caller says why it stops)."""
    entry, target = Path(entry), Path(target)
    data = recorded(entry)
    ok = data is not None and not entry.is_symlink() and entry.exists()
    if ok and entry.is_dir():
        h = hashlib.sha256()
        target.mkdir(mode=0o700)
        for item in sorted(entry.rglob("*")):
            name = item.relative_to(entry).as_posix()
            if item.is_symlink():
                ok = False   # a link inside a built entry is never followed
                break
            if item.is_dir():
                (target / name).mkdir(mode=0o700)
            elif item.is_file():
                h.update(f"file {name}\0".encode())
                copy_hashing(item, target / name, h)
        ok = ok and h.hexdigest() == data["sha256"]
    elif ok:
        ok = copy_hashing(entry, target).hexdigest() == data["sha256"]
    if not ok:
        if target.is_dir():
            shutil.rmtree(target, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
    return ok


@contextlib.contextmanager
def build_lock(entry: Path) -> Iterator[None]:
    """Hold ``ENTRY.lock`` exclusively while the block runs: one build of an entry at a
    time; the kernel releases the lock when its holder dies. The holder removes the lock
    file when done (a failed build leaves nothing behind); a waiter that then wins the
    lock of a removed file takes the lock again on the current one."""
    entry = Path(entry)
    entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock = entry.with_name(entry.name + ".lock")
    while True:
        held = open(lock, "a")  # noqa: SIM115 (closed below, after the unlink)
        try:
            fcntl.flock(held, fcntl.LOCK_EX)
            if _same_file(held, lock):
                break
        except BaseException:
            held.close()
            raise
        held.close()   # its holder removed it meanwhile: lock the current one
    try:
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()
        fcntl.flock(held, fcntl.LOCK_UN)
        held.close()


def _same_file(handle, path: Path) -> bool:
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    opened = os.fstat(handle.fileno())
    return (named.st_dev, named.st_ino) == (opened.st_dev, opened.st_ino)


def ensure(entry: Path, what: str, build) -> Path:
    """``entry`` as verified, or made by ``build()`` (under the lock) and then recorded.
    A build whose result fails the check at once is an error, not a loop."""
    entry = Path(entry)
    if verified(entry, what):
        return entry
    with build_lock(entry):
        if verified(entry, what):
            return entry   # another process built it while this one waited
        build()
        if not entry.exists():
            raise OSError(f"building {what} did not produce {entry}")
        record(entry)
    return entry
