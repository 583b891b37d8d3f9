"""Where data files come from: the data folder, upstream downloads, checksums.

The data folder is chosen by ``--data-dir``, else ``$COMPGEN_DATA``, else
``~/.cache/compgen/data``. Its layout is the same as the upstream mirror: ``scan/``,
``sigmorphon2018/``, ``lm/``, ``cogs/``, ``geoquery/``. ``compgen data fetch NAME`` downloads a data
set (or copies it from an offline mirror with ``--from``) and verifies every file
against the sha256 sums shipped in the package before anything is written.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path

from compgen.errors import SettingError, UserError, decode_text
from compgen.io import user_cache

UPSTREAM = {
    "scan": "https://raw.githubusercontent.com/brendenlake/SCAN/master/",
    "sigmorphon2018": "https://raw.githubusercontent.com/sigmorphon/conll2018/master/task1/all/",
    "lm": "https://raw.githubusercontent.com/jacobandreas/geca/master/data/lm/",
    "cogs": "https://raw.githubusercontent.com/najoungkim/COGS/main/data/",
}
# Files that do not sit under the data folder of the upstream repository.
TEXT2SQL = "https://raw.githubusercontent.com/jkkummerfeld/text2sql-data/5050bad/data/"
UPSTREAM_OVERRIDES = {"cogs/LICENSE": "https://raw.githubusercontent.com/najoungkim/COGS/main/LICENSE",
                      "geoquery/geography.json": TEXT2SQL + "geography.json",
                      "geoquery/geography-logic.txt": TEXT2SQL + "non-sql-data/geography-logic.txt"}
FETCH_NAMES = {"scan": "scan", "sigmorphon": "sigmorphon2018", "sigmorphon2018": "sigmorphon2018",
               "lm": "lm", "cogs": "cogs", "geoquery": "geoquery"}


def default_data_dir() -> Path:
    return user_cache("data")


def resolve_data_dir(option: str | os.PathLike | None = None) -> Path:
    if option:
        path = Path(option)
        if not path.is_dir():
            raise SettingError(f"`data_dir` {path}: no such folder")
        return path
    env = os.environ.get("COMPGEN_DATA")
    if env:
        path = Path(env)
        if not path.is_dir():
            raise UserError(f"COMPGEN_DATA={env}: no such folder")
        return path
    return default_data_dir()


@functools.cache
def checksums() -> dict[str, str]:
    """relative path (``scan/...``) -> sha256, as shipped in the package."""
    text = resources.files("compgen.data").joinpath("SHA256SUMS").read_text()
    sums = {}
    for line in text.splitlines():
        digest, name = line.split(maxsplit=1)
        name = name.removeprefix("./")
        if name != "SHA256SUMS":
            sums[name] = digest
    return sums


FETCHED = "FETCHED"   # the data folder's list of the files `compgen data fetch` wrote


def fetched_files(data_dir: Path) -> set[str]:
    """The relative paths ``compgen data fetch`` wrote into ``data_dir`` (its FETCHED list)."""
    try:
        return set((Path(data_dir) / FETCHED).read_text(encoding="utf-8").split())
    except (OSError, UnicodeDecodeError):
        return set()


def named_data_text(path: Path, data_dir: Path) -> str:
    """The text of a named data set's file in the data folder. A file compgen fetched there
    (``compgen data fetch``, listed in the folder's FETCHED file) is checked, from the bytes
    read, against the sha256 compgen ships for it: edited or damaged, it is refused, never
    used. A file put there by hand (a cut copy for a quick run) is read as it is."""
    path = Path(path)
    relpath = path.relative_to(data_dir).as_posix()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror or type(exc).__name__})") from None
    expected = checksums().get(relpath) if relpath in fetched_files(data_dir) else None
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise UserError(f"{path}: does not match the sha256 compgen ships for {relpath} "
                        f"(edited or damaged); fetch it again: compgen data fetch "
                        f"{relpath.split('/')[0]}")
    return decode_text(data, path)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def upstream_url(relpath: str) -> str:
    if relpath in UPSTREAM_OVERRIDES:
        return UPSTREAM_OVERRIDES[relpath]
    top, rest = relpath.split("/", 1)
    return UPSTREAM[top] + rest


def fetch(name: str, data_dir: Path, mirror: str | os.PathLike | None = None) -> list[Path]:
    """Download (or copy from ``mirror``) every file of data set ``name`` into ``data_dir``.

    All files are verified in a temporary folder first; a checksum mismatch names the file
    and leaves ``data_dir`` untouched.
    """
    if name not in FETCH_NAMES:
        raise UserError(f"unknown data set '{name}' (valid: {', '.join(sorted(set(FETCH_NAMES) - {'sigmorphon2018'}))})")
    top = FETCH_NAMES[name]
    wanted = {rel: digest for rel, digest in checksums().items() if rel.startswith(top + "/")}
    mirror_dir = Path(mirror) if mirror else None
    if mirror_dir is not None and not mirror_dir.is_dir():
        raise SettingError(f"`mirror` {mirror_dir}: no such folder")
    data_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=data_dir, prefix=".fetch-") as tmp:
        staged = []
        for rel, digest in sorted(wanted.items()):
            target = Path(tmp) / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if mirror_dir is not None:
                source = mirror_dir / rel
                if not source.is_file():
                    raise SettingError(f"{source}: missing from the mirror given by `mirror`")
                shutil.copyfile(source, target)
                origin = str(source)
            else:
                url = upstream_url(rel)
                try:
                    with urllib.request.urlopen(url, timeout=60) as resp, open(target, "wb") as f:
                        shutil.copyfileobj(resp, f)
                except (urllib.error.URLError, OSError) as exc:
                    raise UserError(f"cannot download {url}: {exc}") from None
                origin = url
            got = sha256_file(target)
            if got != digest:
                raise UserError(
                    f"{origin}: checksum mismatch (expected sha256 {digest[:12]}…, got {got[:12]}…); "
                    "nothing was written"
                )
            staged.append(rel)
        written = []
        for rel in staged:
            final = data_dir / rel
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(Path(tmp) / rel, final)
            written.append(final)
        listed = Path(tmp) / FETCHED
        listed.write_text("".join(f"{rel}\n" for rel in sorted(fetched_files(data_dir) | set(staged))),
                          encoding="utf-8")
        os.replace(listed, data_dir / FETCHED)
    return written


def embedded_text(filename: str, relpath: str | None = None) -> str | None:
    """Text of a data file embedded in the package (SCAN jump and around_right, the kin LM
    corpus), or None. With ``relpath`` (``lm/kin/train.txt``) the text must match that
    file's sha256 in the shipped SHA256SUMS, like a fetched copy."""
    res = resources.files("compgen.data").joinpath("embedded", filename + ".gz")
    if not res.is_file():
        return None
    data = gzip.decompress(res.read_bytes())
    expected = checksums().get(relpath) if relpath else None
    if expected is not None and hashlib.sha256(data).hexdigest() != expected:
        raise UserError(f"<embedded {filename}>: checksum does not match {relpath} "
                        "(a damaged installation; reinstall compgen)")
    return data.decode("utf-8")


def default_cache_dir() -> Path:
    """``$COMPGEN_CACHE``, else ``$XDG_CACHE_HOME/compgen``, else ``~/.cache/compgen``."""
    if os.environ.get("COMPGEN_CACHE"):
        return Path(os.environ["COMPGEN_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "compgen"
