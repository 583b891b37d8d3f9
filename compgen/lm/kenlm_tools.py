"""Finding and running KenLM's estimation tools: ``lmplz`` (modified Kneser-Ney, unpruned)
and ``build_binary``; resolving corpus arguments.

Where the binaries are looked up, in order:

1. ``$COMPGEN_LMPLZ`` — path to ``lmplz``; ``build_binary`` must sit beside it;
2. ``lmplz`` / ``build_binary`` on ``PATH``;
3. the cache filled by ``bash scripts/install_kenlm.sh``:
   ``${XDG_CACHE_HOME:-~/.cache}/compgen/kenlm/<kenlm module version>/bin``, run only
   when they match the digest record the script writes (``bin.sha256``), from a private
   copy checked as it is made (``checked_binaries``).

Querying (scores) uses the ``kenlm`` Python module, see ``perplexity.py``.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from compgen.data.files import RECORD_SUFFIXES
from compgen.data.lm import EMBEDDED, LANGUAGES, parse_corpus
from compgen.data.sources import embedded_text, named_data_text, resolve_data_dir
from compgen.data.task import task_of
from compgen.errors import SettingError, UserError, not_a_file, read_text
from compgen.io import (
    atomic_open,
    die_with_parent,
    process_temp_folder,
    quiet_native_stderr,
    refuse_overwriting_inputs,
    user_cache,
)
from compgen.lm.model_file import record_path, write_model
from compgen.system import cache

INSTALL_HINT = "build them with: bash scripts/install_kenlm.sh"
SPLITS = ("train", "val", "test")
LMPLZ_PREFIX = "compgen-lmplz-"


def kenlm_version() -> str:
    try:
        return importlib.metadata.version("kenlm")
    except importlib.metadata.PackageNotFoundError:
        raise UserError("the kenlm Python module is not installed (pip install kenlm)") from None


def cache_bin_dir() -> Path:
    """Where ``scripts/install_kenlm.sh`` puts the binaries (same rule as the script)."""
    return user_cache("kenlm") / kenlm_version() / "bin"


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_kenlm_binaries() -> tuple[Path, Path]:
    """(lmplz, build_binary) paths, or a UserError saying how to install them."""
    env = os.environ.get("COMPGEN_LMPLZ")
    if env:
        lmplz = Path(env)
        build_binary = lmplz.with_name("build_binary")
        if not _executable(lmplz):
            raise UserError(f"COMPGEN_LMPLZ={env}: no executable lmplz there; {INSTALL_HINT}")
        if not _executable(build_binary):
            raise UserError(f"COMPGEN_LMPLZ={env}: no build_binary beside it; {INSTALL_HINT}")
        return lmplz, build_binary
    on_path = shutil.which("lmplz")
    if on_path:
        beside = Path(on_path).with_name("build_binary")
        other = shutil.which("build_binary")
        if _executable(beside) or other:
            return Path(on_path), beside if _executable(beside) else Path(other)
    cached = cache_bin_dir()
    if _executable(cached / "lmplz") and _executable(cached / "build_binary"):
        if cache.recorded(cached) is None:
            raise _unrecorded(cached)
        return cached / "lmplz", cached / "build_binary"
    raise UserError(f"KenLM's lmplz/build_binary not found (COMPGEN_LMPLZ, PATH, {cached}); "
                    f"{INSTALL_HINT}")


def _unrecorded(cached: Path) -> UserError:
    return UserError(f"KenLM's lmplz/build_binary in the cache ({cached}) do not match their "
                     f"digest record (none, edited or planted) and are not run; {INSTALL_HINT}")


def checked_binaries(work: Path) -> tuple[Path, Path]:
    """``find_kenlm_binaries``'s, those of the cache copied into ``work`` (a private folder)
    and checked against their digest record as they are copied: the bytes run are the
    bytes checked. Binaries the user named ($COMPGEN_LMPLZ, PATH) are run where they are."""
    lmplz, build_binary = find_kenlm_binaries()
    cached = cache_bin_dir()
    if lmplz != cached / "lmplz":
        return lmplz, build_binary
    copy = Path(work) / "kenlm-bin"
    if not cache.checked_copy(cached, copy):
        raise _unrecorded(cached)
    for name in ("lmplz", "build_binary"):
        os.chmod(copy / name, 0o700)
    return copy / "lmplz", copy / "build_binary"


def _is_samples_tsv(path: Path) -> bool:
    """Whether ``path`` starts with a samples TSV's header: read as a corpus, the header
    and both sides of every pair would be sentences."""
    try:
        with open(path, "rb") as f:
            return f.read(4096).removeprefix(b"\xef\xbb\xbf").startswith(b"#x\t")
    except OSError:
        return False   # the corpus reader names what is wrong with the file


def resolve_corpus(corpus: str | os.PathLike, split: str = "train", data_dir=None) -> Path:
    """A corpus argument -> a file path. An existing file is used as it is; ``lm/<lang>``
    names the ``split`` file of that LM corpus and ``lm/<lang>/<split>`` any split."""
    path = Path(corpus)
    kind = RECORD_SUFFIXES.get(path.suffix.lower())
    if kind or path.is_dir():
        # a data set is pairs, not one sentence a line: read as text it would give JSON,
        # CSV or Parquet bytes as words
        what = f"a {kind.upper()} data file" if kind else "a folder"
        raise SettingError(f"{corpus}: {what}, not a corpus (one sentence a line); train on "
                           "one side of its pairs: `side` y|x|xy")
    if path.is_file():
        if _is_samples_tsv(path):
            raise SettingError(f"{corpus}: a samples TSV of pairs (its first line is the "
                               "#x<TAB>y header), not a corpus (one sentence a line); train "
                               "on one side of its pairs: `side` y|x|xy")
        return path
    match = re.fullmatch(r"lm/(\w+)(?:/(\w+))?", str(corpus))
    if match:
        lang, named_split = match.group(1), match.group(2) or split
        if lang not in LANGUAGES:
            raise UserError(f"unknown LM corpus '{corpus}' (valid: "
                            f"{', '.join('lm/' + x for x in LANGUAGES)})")
        if named_split not in SPLITS:
            raise UserError(f"{corpus}: unknown split '{named_split}' (valid: {', '.join(SPLITS)})")
        root = resolve_data_dir(data_dir)
        path = root / "lm" / lang / f"{named_split}.txt"
        if not path.is_file() and not _install_embedded(lang, named_split, path):
            raise SettingError(f"{path}: missing; run 'compgen data fetch lm' or set `data_dir`")
        named_data_text(path, root)   # an edited copy in the data folder is refused
        return path
    if os.path.exists(corpus):   # a folder or a device: say what it is
        raise UserError(f"{corpus}: {not_a_file(corpus)}")
    raise UserError(f"{corpus}: no such file (nor an LM corpus name like lm/kin)")


def _install_embedded(lang: str, split: str, path: Path) -> bool:
    """lmplz reads files: write the package's checksum-verified copy of an embedded corpus
    (kin) to where ``compgen data fetch lm`` would put it. False if there is none."""
    if lang not in EMBEDDED:
        return False
    text = embedded_text(f"{lang}_{split}.txt", f"lm/{lang}/{split}.txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "w", encoding="utf-8") as out:
        out.write(text)
    return True


def check_corpus(path: Path) -> int:
    """Number of non-blank lines; an empty or binary (not UTF-8) corpus is a UserError."""
    return len(corpus_sentences(path))


def corpus_sentences(path: Path) -> list[list[str]]:
    """The corpus as the scorer reads it (``compgen.data.lm.parse_corpus``: lines split on
    any Unicode line break, words on any Unicode whitespace, blank lines skipped); an
    empty or binary (not UTF-8) corpus is a UserError."""
    return parse_corpus(read_text(path), str(path))


def max_supported_order() -> int:
    """The highest n-gram order this installation can load: the kenlm module's
    KENLM_MAX_ORDER (read from its refusal of a header of a larger order), and the C++
    runner's query library's where it is installed. lmplz itself estimates any order."""
    global _MAX_ORDER
    if _MAX_ORDER is None:
        # optional: kenlm's Python module builds from source and may be missing
        import kenlm

        probe = 64
        header = "\\data\\\n" + "".join(f"ngram {k}=1\n" for k in range(1, probe + 1)) + "\n"
        limits = [probe]
        with tempfile.NamedTemporaryFile("w", suffix=".arpa", prefix="compgen-order-") as f:
            f.write(header)
            f.flush()
            try:
                with quiet_native_stderr():
                    kenlm.Model(f.name)
            except (OSError, RuntimeError) as exc:
                found = re.search(r"support up to (\d+)", str(exc))
                if found:
                    limits.append(int(found.group(1)))
        recorded = cache_bin_dir().parent / "query" / "max_order"
        if recorded.is_file() and recorded.read_text().strip().isdigit():
            limits.append(int(recorded.read_text().strip()))
        _MAX_ORDER = min(limits)
    return _MAX_ORDER


_MAX_ORDER: int | None = None


def check_order(order: int) -> None:
    """``--order`` within 1 .. what the KenLM build loads, before any estimation."""
    if order < 1:
        raise SettingError(f"`order` must be >= 1 (got {order})")
    limit = max_supported_order()
    if order > limit:
        raise SettingError(f"`order` {order}: this KenLM build loads models of order <= {limit} "
                           "(KENLM_MAX_ORDER); a larger model would be refused when used")


def _tool_error(tool: str, corpus: Path, stderr: str) -> UserError:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if any("discount_fallback" in line for line in lines):
        return SettingError(f"{corpus}: lmplz cannot estimate Kneser-Ney discounts (corpus too "
                            "small or artificial); rerun with `discount_fallback`")
    # KenLM prints "FILE:LINE in FUNCTION threw EXCEPTION[ because `COND'].", then the
    # reason; its progress banner comes first and is no reason
    thrown = next((i for i, line in enumerate(lines) if " threw " in line), None)
    if thrown is not None:
        after = [line for line in lines[thrown + 1:] if not line.startswith(("ERROR", "==="))]
        reason = after[0] if after else lines[thrown].split(" threw ", 1)[1]
    else:
        banner = ("===", "Reading ", "----", "****", "Memory estimate", "Unigram tokens",
                  "Chain sizes", "Statistics")
        rest = [line for line in lines if not line.startswith(banner) and not line.startswith("/")
                and "Exception" not in line and "ERROR" not in line and line.strip("*-+0123456789 ")]
        reason = rest[0] if rest else (lines[-1] if lines else "no message")
    return UserError(f"{corpus}: {tool} failed: {reason}")


def train_lm(corpus: str | os.PathLike, output: str | os.PathLike, order: int = 5,
             discount_fallback: bool = False, memory: str = "500M", data_dir=None) -> Path:
    """Estimate an ``order``-gram modified Kneser-Ney model with lmplz on ``corpus`` (file or
    ``lm/<lang>`` = its train split). lmplz is given the corpus as the scorer tokenises it
    (``corpus_sentences``); words split on any whitespace, tabs included, so the samples
    TSV of ``compgen augment geca --concat`` on an LM corpus (empty x column) is read as the
    plain corpus. ``output`` ending in ``.bin`` is converted with
    build_binary, anything else is written as ARPA; written atomically either way, with a
    digest record beside it (``MODEL.sha256``, see ``model_file``).
    ``memory`` is lmplz's sorting memory (``-S``); it does not change the model."""
    check_order(order)
    corpus_path = resolve_corpus(corpus, "train", data_dir)
    kept = [resolve_data_dir(data_dir)] if task_of(corpus).family == "lm" else []
    for written, option in ((output, "`output`"),
                            (record_path(output), f"`output` {output}'s digest record")):
        refuse_overwriting_inputs(written, [("corpus", corpus_path)], option, kept_folders=kept)
    sentences = corpus_sentences(corpus_path)
    find_kenlm_binaries()
    output = Path(output)
    binary = output.suffix == ".bin"
    # named by process id: the next `lm train` sweeps a killed run's folder (15 MB of sort
    # files), which no cleanup code of a SIGKILLed process removes
    work = process_temp_folder(LMPLZ_PREFIX)
    try:
        tmp = str(work)
        lmplz, build_binary = checked_binaries(work)
        cmd = [str(lmplz), "-o", str(order), "-S", memory, "-T", tmp]
        if discount_fallback:
            cmd.append("--discount_fallback")
        arpa = Path(tmp) / "model.arpa"
        # lmplz reads the words the scorer reads: its own split (ASCII spaces and tabs,
        # '\n' lines) would keep a non-breaking space inside a word the scorer splits
        tokenised = Path(tmp) / "corpus.txt"
        with open(tokenised, "w", encoding="utf-8", newline="\n") as out:
            out.writelines(" ".join(words) + "\n" for words in sentences)
        del sentences
        with open(tokenised, "rb") as stdin, open(arpa, "wb") as stdout:
            proc = subprocess.run(cmd, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
                                  check=False, preexec_fn=die_with_parent)
        if proc.returncode != 0:
            raise _tool_error("lmplz", corpus_path, proc.stderr.decode(errors="replace"))
        result = arpa
        if binary:
            result = Path(tmp) / "model.bin"
            proc = subprocess.run([str(build_binary), "-T", tmp, str(arpa), str(result)],
                                  capture_output=True, check=False, preexec_fn=die_with_parent)
            if proc.returncode != 0:
                raise _tool_error("build_binary", corpus_path, proc.stderr.decode(errors="replace"))
        # with its digest record: a model changed after this is refused when loaded
        write_model(result, output)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return output
