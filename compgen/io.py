"""Atomic file output and the samples TSV format shared by every augmenter."""

from __future__ import annotations

import contextlib
import ctypes
import getpass
import glob
import os
import shutil
import sys
import tempfile
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from compgen.errors import SettingError, UserError, not_a_file, read_text, where


def user_cache(name: str) -> Path:
    """``$XDG_CACHE_HOME/compgen/<name>`` (``~/.cache`` without it): built runners, native
    loops, optimised graphs and other files a later run can reuse."""
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "compgen" / name


def keep_torch_compiler_cache() -> None:
    """torch's compiler (Inductor) makes its cache folder in the system temp dir as soon as
    an optimizer is built or the compiler imported, and leaves it there: point it at the
    user's cache instead, unless the caller chose a folder (Inductor writes its default into
    the variable once it has used it, so that value counts as not chosen)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    default = os.path.join(tempfile.gettempdir(), f"torchinductor_{user}")
    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if chosen is None or os.path.abspath(chosen) == os.path.abspath(default):
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(user_cache("inductor"))


def die_with_parent() -> None:
    """``preexec_fn`` of a child process that must not outlive this one (lmplz): the kernel
    sends it SIGKILL when its parent exits, however the parent ends (Linux)."""
    pr_set_pdeathsig, sigkill = 1, 9
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, sigkill, 0, 0, 0)


def current_umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def staging_prefix(path: Path) -> str:
    """``.NAME.PID.``: the prefix of a temporary file or folder beside ``path``; the process
    id lets a later run tell a dead writer's leftovers from a live writer's work."""
    return f".{path.name}.{os.getpid()}."


def remove_stale_staging(path: Path) -> list[Path]:
    """Remove ``.NAME.PID.*`` files and folders beside ``path`` whose process is gone (a run
    killed while writing ``path``); returns what was removed."""
    removed = []
    if not path.parent.is_dir():
        return removed
    for leftover in path.parent.glob(f".{glob.escape(path.name)}.*"):
        if not _left_by_dead_process(leftover.name[len(path.name) + 2:], "."):
            continue
        if leftover.is_dir() and not leftover.is_symlink():
            shutil.rmtree(leftover, ignore_errors=True)
        else:
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        removed.append(leftover)
    return removed


def process_temp_folder(prefix: str, parent: str | os.PathLike | None = None) -> Path:
    """A new private folder ``PREFIX<pid>-XXXX`` in ``parent`` (None: TMPDIR), made after
    removing the ``PREFIX<pid>-*`` folders there whose process is gone (a run killed while
    it worked, e.g. by SIGKILL, which no cleanup code survives). The caller removes it."""
    parent = Path(parent) if parent is not None else Path(tempfile.gettempdir())
    remove_stale_temp_folders(prefix, parent)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))


def remove_stale_temp_folders(prefix: str, parent: Path) -> list[Path]:
    """Remove ``process_temp_folder``'s folders in ``parent`` whose process is gone; never
    a live process's, nor another user's, nor a name without a process id."""
    removed = []
    for leftover in Path(parent).glob(f"{glob.escape(prefix)}*-*"):
        if (not _left_by_dead_process(leftover.name[len(prefix):], "-")
                or leftover.is_symlink() or not leftover.is_dir()
                or leftover.stat().st_uid != os.getuid()):
            continue
        shutil.rmtree(leftover, ignore_errors=True)
        removed.append(leftover)
    return removed


def _left_by_dead_process(rest: str, separator: str) -> bool:
    """Whether a leftover's name, from its process id on (``PID<separator>...``), names a
    process that is gone (not this one, not a live one, not a name without a pid)."""
    pid = rest.split(separator, 1)[0]
    return pid.isdigit() and int(pid) != os.getpid() and not _process_alive(int(pid))


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "w", **kwargs) -> Iterator:
    """Open a temporary file beside ``path``; rename it over ``path`` only on success.

    An interrupted run therefore never leaves a half-written output file; the leftovers of
    a killed one are removed by the next write of the same path. The file gets the mode
    the umask gives (mkstemp alone would make it 0600).
    """
    path = Path(path)
    if path.parent and not path.parent.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(path)
    fd, tmp = tempfile.mkstemp(prefix=staging_prefix(path), suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, mode, **kwargs) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def check_output(path: str | os.PathLike, option: str = "-o", folder: bool = False) -> None:
    """Fail now, before any work, if ``path`` cannot be written: a folder where a file is
    wanted (or the reverse), a parent that is a file, or a folder that refuses new files
    (checked by creating and removing a temporary file there)."""
    path = Path(path)
    if folder and path.exists() and not path.is_dir():
        raise UserError(f"{option} {path}: exists and is not a folder")
    if not folder and path.is_dir():
        raise UserError(f"{option} {path}: is a folder; give a file name")
    existing = path.parent
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{option} {path}: {existing} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=staging_prefix(path), suffix=".tmp", dir=existing)
    except OSError as exc:
        raise UserError(f"{option} {path}: cannot write in {existing} "
                        f"({exc.strerror or type(exc).__name__})") from None
    os.close(fd)
    os.unlink(probe)


def refuse_overwriting_inputs(output: str | os.PathLike, inputs, option: str = "-o",
                              kept_folders=()) -> None:
    """Refuse, before any work, an output that would destroy what the command reads:
    ``output`` is the same file or folder as an input (by any name, link or hard link), or
    lies inside an input export folder (one holding ``manifest.json``: its files are
    checksummed) or inside one of ``kept_folders`` (a named data set's folder).
    ``inputs``: (label, path) pairs, e.g. ``("DATA", "d.txt")``; paths that do not exist
    are skipped."""
    output = Path(output)
    target = output.resolve()
    for label, value in inputs:
        path = Path(value)
        if not os.path.lexists(path):
            continue
        shown = f"{label} {path}" if str(path) != label else label
        same = (os.path.samefile(output, path) if output.exists() and path.exists()
                else target == path.resolve())
        if same:
            raise SettingError(f"{option} {output}: is also an input ({shown}); writing it "
                            "would replace what the command reads; write to another path")
        if path.is_dir() and (path / "manifest.json").is_file() \
                and path.resolve() in target.parents:
            raise SettingError(f"{option} {output}: inside the export folder {shown}, whose "
                            "files are checksummed; write to a path outside it")
    for folder in kept_folders:
        if Path(folder).resolve() in target.parents:
            raise SettingError(f"{option} {output}: inside the data folder {folder}, which "
                            "compgen reads and verifies; write to a path outside it")


# Tokens are space-joined, so a token that IS a space (a character of a multi-word
# SIGMORPHON lemma or form) is written as U+2581 and read back as a space.
SPACE_TOKEN = "\u2581"


# What a token cannot hold and still read back from a samples TSV as itself: white space
# of any kind (str.split and str.splitlines break at all of it, U+001C..U+001F included),
# NUL (a file holding one is binary) and U+2581 (the stand-in for a space token). The token
# " " itself is fine: it is written as U+2581.
UNWRITABLE = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004"
              "\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\x00\u2581")
_UNWRITABLE_CLASS = "[" + "".join(f"\\x{{{ord(c):X}}}" for c in UNWRITABLE) + "]"


# The header line of a samples TSV. Written before every file of pairs, it tells the
# readers the file's format, so that no first row is read as anything else (``IN: ...``
# as SCAN, ``x<TAB>y`` or a line of names as a header, a JSON object).
SAMPLES_HEADER = "#x\ty"


def unwritable_token(table, columns: Sequence[str] = ("x", "y")) -> tuple[int, str, str, str] | None:
    """(row, column, token, what is wrong) of the first token of ``table``'s token-list
    columns that a samples TSV would not read back as itself, else None (vectorised: only
    the offending row is looked at in Python)."""
    import polars as pl  # start-up: `import compgen` loads no polars; the call does

    for column in columns:
        # the readers NFC-normalise what they read: another form would come back changed
        bad = pl.element().is_null() | (pl.element() == "") | (
            (pl.element() != " ") & pl.element().str.contains(_UNWRITABLE_CLASS)) | (
            pl.element().str.normalize("NFC") != pl.element())
        hits = table[column].list.eval(bad).list.any().fill_null(False)
        if not hits.any():
            continue
        row = int(hits.arg_true()[0])
        for token in table[column][row]:
            if token is None or token == "":
                return row, column, "" if token is None else token, "is empty"
            char = next((c for c in token if c in UNWRITABLE), None)
            if token != " " and char is not None:
                return row, column, token, f"holds U+{ord(char):04X}"
            if unicodedata.normalize("NFC", token) != token:
                return row, column, token, "is not in Unicode NFC form (read back normalised)"
    return None


def unreadable_line(table) -> tuple[int, str, str] | None:
    """(row, x token, what is wrong) of the first row of ``table`` whose samples-TSV line
    would not read back as a row, else None: an x starting with ``#`` makes a comment line,
    an empty x and y a blank one."""
    comment = table["x"].list.first().str.starts_with("#").fill_null(False)
    blank = (table["x"].list.len() == 0) & (table["y"].list.len() == 0)
    hits = (comment | blank.fill_null(False))
    if not hits.any():
        return None
    row = int(hits.arg_true()[0])
    if comment[row]:
        return (row, table["x"][row][0],
                "starts with '#', which makes its line a comment that the readers skip")
    return row, "", "is missing: the x and y of the row are both empty, a blank line"


def refuse_unwritable(table, path, columns: Sequence[str] = ("x", "y"), first_row: int = 0) -> None:
    """A UserError before ``path`` is written if a token would not read back as written,
    or a row would not read back as a row. ``first_row``: the number of rows written
    before ``table``'s (for the row number in the message)."""
    found = unwritable_token(table, columns)
    if found is not None:
        row, column, token, what = found
        raise UserError(f"{path}: the {column} token {token!r} of row {first_row + row + 1} "
                        f"{what}; tokens are written space-separated in tab-separated lines, "
                        "so it would not read back as written: remove or replace it")
    found = unreadable_line(table) if {"x", "y"} <= set(columns) else None
    if found is not None:
        row, token, what = found
        shown = f"the first x token {token!r}" if token else "the row"
        raise UserError(f"{path}: {shown} of row {first_row + row + 1} {what}; the row would "
                        "not read back from a samples TSV: remove or replace it")


def refuse_comment_rows(text: str, source: str) -> None:
    """A UserError if a samples TSV written elsewhere (the C++ runner) has a row after its
    header line that the readers would skip as a comment (an x starting with ``#``)."""
    for row, line in enumerate(text.splitlines()[1:], 1):
        if line.startswith("#"):
            token = line.split("\t", 1)[0].split(" ", 1)[0]
            raise UserError(f"{source}: the first x token {token!r} of row {row} starts with "
                            "'#', which makes its line a comment that the readers skip; the "
                            "row would not read back from a samples TSV")


def has_inputs(table) -> bool:
    """Whether some row of ``table`` has an x: a file of pairs, written with the samples
    header. Without one it is a corpus (``<TAB>sentence`` lines), which ``lm train`` reads
    as it is and which no reader can mistake for another format."""
    return bool(table.height) and bool((table["x"].list.len() > 0).any())


def token_field(tokens: Sequence[str]) -> str:
    """Tokens as one samples-TSV field (``field_tokens`` reads it back)."""
    return " ".join(SPACE_TOKEN if t == " " else t for t in tokens)


def field_tokens(field: str) -> list[str]:
    return [" " if t == SPACE_TOKEN else t for t in field.split()]


def write_samples_tsv(
    path: str | os.PathLike,
    pairs: Iterable[tuple[Sequence[str], Sequence[str]]],
    scores: dict[str, Sequence[float]] | None = None,
) -> int:
    """Write ``x<TAB>y[<TAB>score...]`` lines (tokens space-joined, a space token as
    U+2581) after the ``#x<TAB>y[<TAB>score...]`` header (none for a corpus without
    scores: see ``has_inputs``); returns the row count."""
    pairs = list(pairs)
    import polars as pl  # start-up: `import compgen` loads no polars; the call does

    check = pl.DataFrame({"x": [list(x) for x, _ in pairs], "y": [list(y) for _, y in pairs]},
                         schema={"x": pl.List(pl.String), "y": pl.List(pl.String)})
    refuse_unwritable(check, path)
    scores = scores or {}
    for name, column in scores.items():
        if len(column) != len(pairs):
            raise ValueError(f"score column {name} has {len(column)} values, need {len(pairs)}")
    n = 0
    with atomic_open(path, "w", encoding="utf-8") as out:
        if scores or has_inputs(check):
            out.write("\t".join([SAMPLES_HEADER, *scores]) + "\n")
        for i, (x, y) in enumerate(pairs):
            fields = [token_field(x), token_field(y)] + [f"{scores[k][i]:.6g}" for k in scores]
            out.write("\t".join(fields) + "\n")
            n += 1
    return n


def parse_samples_tsv(text: str, source: str = "<samples>") -> list[tuple[list[str], list[str]]]:
    """Parse samples TSV text: ``x<TAB>y`` plus optional score columns; ``#`` lines are headers.

    Every row has as many fields as the header (else as the first row), and score columns
    hold numbers: a ragged row is a UserError naming its line."""
    pairs = []
    width, width_from = None, None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith("#"):
            if width is None and line.startswith("#x\t"):
                width, width_from = len(line.split("\t")), f"the header on line {lineno}"
            continue
        fields = line.split("\t")
        if len(fields) < 2:
            raise UserError(f"{where(source, lineno)}: expected 'x<TAB>y', found no tab")
        if width is None:
            width, width_from = len(fields), f"line {lineno}"
        if len(fields) != width:
            raise UserError(f"{where(source, lineno)}: {len(fields)} tab-separated fields, "
                            f"expected {width} (as on {width_from})")
        for column, score in enumerate(fields[2:], 3):
            try:
                float(score)
            except ValueError:
                raise UserError(f"{where(source, lineno)}: field {column} ({score[:40]!r}) is "
                                "not a number (a samples TSV is x<TAB>y[<TAB>score...])") from None
        pairs.append((field_tokens(fields[0]), field_tokens(fields[1])))
    if not pairs:
        raise UserError(f"{source}: no samples in file")
    return pairs


def read_inputs(path: str | os.PathLike, option: str = "`input`") -> list[list[str]]:
    """Inputs to predict, one per line, tokens separated by spaces (a TSV's first column).
    A samples file's header is skipped: ``#x<TAB>y...`` as written, or ``#x`` alone as
    ``cut -f1`` leaves it."""
    path = Path(path)
    if not path.is_file():
        raise SettingError(f"{option} {path}: {not_a_file(path)}")
    lines = [line for line in read_text(path).splitlines() if line.strip()]
    if lines and (lines[0] == "#x" or lines[0].startswith("#x\t")):
        lines = lines[1:]
    sources = [line.split("\t", 1)[0].split() for line in lines]
    sources = [s for s in sources if s]
    if not sources:
        raise SettingError(f"{option} {path}: no inputs (empty file)")
    return sources


def read_samples_tsv(path: str | os.PathLike) -> list[tuple[list[str], list[str]]]:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: {not_a_file(path)}")
    return parse_samples_tsv(read_text(path), str(path))


@contextlib.contextmanager
def quiet_native_stderr():
    """Silence what C++ libraries print straight to file descriptor 2 (torch's ONNX
    exporter warns about shape inference there); Python exceptions still propagate."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
