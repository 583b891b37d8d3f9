"""Finding and running KenLM's estimation tools: ``lmplz`` (modified Kneser-Ney, unpruned)
and ``build_binary``; resolving corpus arguments.

Where the binaries are looked up, in order:

1. ``$COMPGEN_LMPLZ`` — path to ``lmplz``; ``build_binary`` must sit beside it;
2. ``lmplz`` / ``build_binary`` on ``PATH``;
3. the cache filled by ``bash scripts/install_kenlm.sh``:
   ``${XDG_CACHE_HOME:-~/.cache}/compgen/kenlm/<kenlm module version>/bin``.

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

from compgen.errors import UserError
from compgen.io import atomic_open, die_with_parent, user_cache

INSTALL_HINT = "build them with: bash scripts/install_kenlm.sh"
SPLITS = ("train", "val", "test")


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
        return cached / "lmplz", cached / "build_binary"
    raise UserError(f"KenLM's lmplz/build_binary not found (COMPGEN_LMPLZ, PATH, {cached}); "
                    f"{INSTALL_HINT}")


def resolve_corpus(corpus: str | os.PathLike, split: str = "train", data_dir=None) -> Path:
    """A corpus argument -> a file path. An existing file is used as it is; ``lm/<lang>``
    names the ``split`` file of that LM corpus and ``lm/<lang>/<split>`` any split."""
    path = Path(corpus)
    if path.is_file():
        return path
    match = re.fullmatch(r"lm/(\w+)(?:/(\w+))?", str(corpus))
    if match:
        from compgen.data.lm import LANGUAGES
        from compgen.data.sources import resolve_data_dir

        lang, named_split = match.group(1), match.group(2) or split
        if lang not in LANGUAGES:
            raise UserError(f"unknown LM corpus '{corpus}' (valid: "
                            f"{', '.join('lm/' + x for x in LANGUAGES)})")
        if named_split not in SPLITS:
            raise UserError(f"{corpus}: unknown split '{named_split}' (valid: {', '.join(SPLITS)})")
        path = resolve_data_dir(data_dir) / "lm" / lang / f"{named_split}.txt"
        if not path.is_file() and not _install_embedded(lang, named_split, path):
            raise UserError(f"{path}: missing; run 'compgen data fetch lm' or set --data-dir")
        return path
    raise UserError(f"{corpus}: no such file (nor an LM corpus name like lm/kin)")


def _install_embedded(lang: str, split: str, path: Path) -> bool:
    """lmplz reads files: write the package's checksum-verified copy of an embedded corpus
    (kin) to where ``compgen data fetch lm`` would put it. False if there is none."""
    from compgen.data.lm import EMBEDDED
    from compgen.data.sources import embedded_text
    from compgen.io import atomic_open

    if lang not in EMBEDDED:
        return False
    text = embedded_text(f"{lang}_{split}.txt", f"lm/{lang}/{split}.txt")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_open(path, "w", encoding="utf-8") as out:
        out.write(text)
    return True


def check_corpus(path: Path) -> int:
    """Number of non-blank lines; an empty or binary (not UTF-8) corpus is a UserError."""
    from compgen.errors import read_text

    n = sum(1 for line in read_text(path).splitlines() if line.strip())
    if n == 0:
        raise UserError(f"{path}: empty corpus (no sentences)")
    return n


def _tool_error(tool: str, corpus: Path, stderr: str) -> UserError:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if any("discount_fallback" in line for line in lines):
        return UserError(f"{corpus}: lmplz cannot estimate Kneser-Ney discounts (corpus too small "
                         "or artificial); rerun with --discount_fallback")
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
    ``lm/<lang>`` = its train split). lmplz splits words on spaces and tabs, so the samples
    TSV of ``compgen augment geca --concat`` on an LM corpus (empty x column) is read as the
    plain corpus. ``output`` ending in ``.bin`` is converted with
    build_binary, anything else is written as ARPA; written atomically either way.
    ``memory`` is lmplz's sorting memory (``-S``); it does not change the model."""
    if order < 1:
        raise UserError(f"--order must be >= 1 (got {order})")
    corpus_path = resolve_corpus(corpus, "train", data_dir)
    check_corpus(corpus_path)
    lmplz, build_binary = find_kenlm_binaries()
    output = Path(output)
    binary = output.suffix == ".bin"
    with tempfile.TemporaryDirectory(prefix="compgen-lmplz-") as tmp:
        cmd = [str(lmplz), "-o", str(order), "-S", memory, "-T", tmp]
        if discount_fallback:
            cmd.append("--discount_fallback")
        arpa = Path(tmp) / "model.arpa"
        with open(corpus_path, "rb") as stdin, open(arpa, "wb") as stdout:
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
        with atomic_open(output, "wb") as out, open(result, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
    return output
