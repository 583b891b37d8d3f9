"""The C++ runner (``cpp_runner/``): built once with CMake against the libtorch inside the
installed torch wheel, cached in ``~/.cache/compgen/cpp_runner/<key>/`` (key = hash of the
sources and the torch version), run as a subprocess."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

from compgen.errors import UserError, read_text
from compgen.io import field_tokens

SOURCE = Path(__file__).resolve().parents[2] / "cpp_runner"


def _cache_root() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "compgen" / "cpp_runner"


def _source_key() -> str:
    import torch

    h = hashlib.sha256(torch.__version__.encode())
    for path in sorted(SOURCE.rglob("*")):
        if path.is_file() and "build" not in path.parts:
            h.update(path.relative_to(SOURCE).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def kenlm_query_dir() -> Path:
    """KenLM's query library as ``scripts/install_kenlm.sh`` caches it beside lmplz."""
    from compgen.lm.kenlm_tools import cache_bin_dir

    return cache_bin_dir().parent / "query"


def build_runner(log=print, kenlm: bool = False) -> Path:
    """Path of the ``compgen-sample`` binary, building it first if needed (~1 min).
    ``kenlm``: the build that links KenLM's query library (``--lm``)."""
    import torch.utils

    if not (SOURCE / "CMakeLists.txt").is_file():
        raise UserError(f"{SOURCE}: C++ runner sources not found (run from a compgen checkout)")
    for tool in ("cmake", "c++"):
        if shutil.which(tool) is None:
            raise UserError(f"'{tool}' not found: install cmake and a C++ compiler "
                            "(apt-get install cmake g++) to use --backend cpp")
    extra = []
    if kenlm:
        query = kenlm_query_dir()
        if not (query / "lib" / "libkenlm.a").is_file():
            raise UserError(f"KenLM's query library is not in {query}: build it with "
                            "bash scripts/install_kenlm.sh")
        extra = ["-DCOMPGEN_KENLM=ON", f"-DKENLM_QUERY_DIR={query}"]
    folder = _cache_root() / (_source_key() + ("-kenlm" if kenlm else ""))
    binary = folder / "compgen-sample"
    if binary.is_file():
        return binary
    build = folder / "build"
    log(f"building the C++ runner in {folder} (once, about a minute)")
    configure = ["cmake", "-S", str(SOURCE), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                 f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}", *extra]
    for cmd in (configure, ["cmake", "--build", str(build), "-j", str(os.cpu_count() or 1)]):
        result = subprocess.run(cmd, check=False, capture_output=True, text=True)
        if result.returncode != 0:
            tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
            raise UserError("building the C++ runner failed: " + " | ".join(tail))
    tmp = folder / ".compgen-sample.tmp"
    shutil.copy2(build / "compgen-sample", tmp)
    os.replace(tmp, binary)
    shutil.rmtree(build, ignore_errors=True)
    return binary


def run_cpp(binary: Path, folder: Path, out: Path, *, n: int, batch_size: int, strategy: str,
            seed: int, max_len: int, offset: int = 0, temperature: float = 1.0,
            beam_width: int = 4, vae_max_norm: float = 0.0, threads: int | None = None,
            workers: int = 1, lm_args: list[str] | None = None) -> float:
    """Run the C++ sampler; returns its samples/s (as it reports on stderr). ``workers``
    batches are decoded at once, one per thread (see cpp_runner/src/main.cpp).
    ``lm_args``: the runner's --lm options (``compgen.lm.rerank.LmRanking.runner_args``)."""
    cmd = [str(binary), str(folder), "-o", str(out), "--n", str(n), "--batch-size",
           str(batch_size), "--strategy", strategy, "--seed", str(seed), "--max-len",
           str(max_len), "--offset", str(offset), "--temperature", str(temperature),
           "--beam-width", str(beam_width), "--vae-max-norm", str(vae_max_norm)]
    if threads:
        cmd += ["--threads", str(threads)]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    cmd += lm_args or []
    result = subprocess.run(cmd, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        message = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else "failed"
        raise UserError(f"C++ runner: {message.removeprefix('error: ')}")
    sampled = [line for line in result.stderr.splitlines() if line.startswith("sampled ")]
    words = sampled[-1].split("(")[-1].split() if sampled else []
    return float(words[0]) if words and _is_number(words[0]) else float("nan")


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def read_cpp_samples(path: Path) -> list[tuple[list[str], list[str], float, float]]:
    rows = []
    for line in read_text(Path(path)).splitlines():
        if line.startswith("#"):
            continue
        x, y, logp, low = line.split("\t")[:4]  # lm_logp (--lm) is read apart
        rows.append((field_tokens(x), field_tokens(y), float(logp), float(low)))
    return rows


def read_cpp_lm_scores(path: Path) -> list[float]:
    """The runner's lm_logp column (written with --lm), one value per sample row."""
    return [float(line.split("\t")[4]) for line in
            Path(path).read_text(encoding="utf-8").splitlines() if not line.startswith("#")]
