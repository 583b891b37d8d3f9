"""A KenLM model's digest record: ``compgen lm train`` writes ``MODEL.sha256`` beside the
model it writes (``compgen.system.cache``'s record format), and every load of a model that
has one checks the bytes first. A bit flipped in a model changes its scores without any
error from KenLM (a flipped ``.bin`` gave perplexity 159 instead of 30, exit 0); with the
record it is one error line. A model without a record (a user's own lmplz output) is
loaded as it is.

What is loaded is what was checked: KenLM (the Python module and the C++ runner) opens a
path, so a recorded model is copied into this process's private folder, hashed as it is
copied, and that copy is what they load. One check per model file and process (the copy
is reused while the file's identity and time stamp stay the same)."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import itertools
import json
import os
import shutil
from pathlib import Path

from compgen.errors import UserError
from compgen.io import atomic_open, process_temp_folder
from compgen.system import cache

WRITER = "compgen lm train"
COPY_PREFIX = "compgen-lm-"

_copies: dict[tuple, Path] = {}
_copy_numbers = itertools.count()
_folder: Path | None = None


def record_path(model: str | os.PathLike) -> Path:
    """``MODEL.sha256``, beside the model."""
    return cache.record_path(Path(model))


def write_model(source: Path, output: Path) -> Path:
    """Copy the model at ``source`` to ``output`` (atomically) with its digest record, the
    digest taken of the bytes as they are copied. The old record goes first, so a run
    killed in between leaves a model without a record (accepted), never a model with the
    record of another."""
    output = Path(output)
    with contextlib.suppress(FileNotFoundError):
        record_path(output).unlink()
    digest = hashlib.sha256()
    with atomic_open(output, "wb") as out, open(source, "rb") as src:
        while chunk := src.read(cache.CHUNK):
            digest.update(chunk)
            out.write(chunk)
    try:
        with atomic_open(record_path(output), "w", encoding="utf-8") as out:
            json.dump({"sha256": digest.hexdigest(), "written_by": WRITER}, out)
    except BaseException:   # the two together or neither (a full disk, a signal)
        with contextlib.suppress(FileNotFoundError):
            output.unlink()
        raise
    return output


def checked_model_file(path: str | os.PathLike) -> Path:
    """The file to load for the model at ``path``: ``path`` itself when it has no record,
    else a private copy whose bytes matched the record as they were copied. A mismatch
    (or an unreadable record) is a UserError naming the model, before any scoring."""
    path = Path(path)
    record = record_path(path)
    if not record.exists() or not path.is_file():
        return path
    stat = path.stat()
    key = (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if key in _copies and _copies[key].is_file():
        return _copies[key]
    data = cache.recorded(path)
    if data is None:
        raise UserError(f"{path}: its digest record {record.name} is unreadable; train the "
                        f"model again, or remove {record.name} to use the model as it is")
    copy = _private_folder() / f"{next(_copy_numbers)}-{path.name}"
    if cache.copy_hashing(path, copy).hexdigest() != data["sha256"]:
        copy.unlink()
        raise UserError(f"{path}: does not match its digest record {record.name} (written by "
                        f"`{data.get('written_by', WRITER)}`): the file changed after it was "
                        "written (corrupt or edited); train it again")
    _copies[key] = copy
    return copy


def _private_folder() -> Path:
    global _folder
    if _folder is None or not _folder.is_dir():
        _folder = process_temp_folder(COPY_PREFIX)
        atexit.register(shutil.rmtree, _folder, True)
    return _folder
