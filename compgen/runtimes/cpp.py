"""The C++ runner (``cpp_runner/``): built once with CMake against the libtorch inside the
installed torch wheel, cached in ``~/.cache/compgen/cpp_runner/<key>/`` (key = hash of the
sources, the torch version and where that torch is installed: the binary finds libtorch
by its absolute path, so a runner built for another environment must not be reused).
One process does a whole sampling job (decode rounds, filters, n-gram scores when asked,
keeping the best, the samples TSV); its job arrives on standard input, so nothing is
written to a temporary folder. The build that scores with KenLM (``kenlm=True``) is made
only for jobs with an LM."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from importlib import metadata, util
from pathlib import Path

from compgen.decoding.contract import MODES, STATE_NAMES, Contract
from compgen.decoding.options import SampleOptions
from compgen.errors import Interrupted, SettingError, UserError
from compgen.io import remove_stale_staging, staging_prefix
from compgen.lm.kenlm_tools import cache_bin_dir
from compgen.runtimes.manifest import PROTOTYPE_FILE, Manifest
from compgen.system import cache

MODE_NAMES = {v: k for k, v in MODES.items()}
# max_rounds 0 means no cap; the runner counts rounds in an int64 and wants a cap >= 1
UNCAPPED_ROUNDS = 2**62

SOURCE = Path(__file__).resolve().parents[2] / "cpp_runner"


def _cache_root() -> Path:
    return cache.store("cpp_runner")


def _source_key() -> str:
    # the installed torch's version and folder without importing torch (a second of the
    # runner's path); the folder because the binary's rpath names its libtorch
    torch_dir = Path(util.find_spec("torch").origin).resolve().parent
    h = hashlib.sha256(metadata.version("torch").encode())
    h.update(str(torch_dir).encode())
    for path in sorted(SOURCE.rglob("*")):
        if path.is_file() and "build" not in path.parts:
            h.update(path.relative_to(SOURCE).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def kenlm_query_dir() -> Path:
    """KenLM's query library as ``scripts/install_kenlm.sh`` caches it beside lmplz."""
    return cache_bin_dir().parent / "query"


def build_runner(log=print, kenlm: bool = False) -> Path:
    """Path of the ``compgen-sample`` binary, building it first if needed (~1 min).
    ``kenlm``: the build that links KenLM's query library (it scores samples with an LM
    inside its loop); it also holds ``compgen-lm-score`` (``lm_score_binary``)."""
    if not (SOURCE / "CMakeLists.txt").is_file():
        raise UserError(f"{SOURCE}: C++ runner sources not found (run from a compgen checkout)")
    extra = []
    if kenlm:
        query = kenlm_query_dir()
        if not (query / "lib" / "libkenlm.a").is_file():
            raise UserError(f"KenLM's query library is not in {query}: build it with "
                            "bash scripts/install_kenlm.sh")
        extra = ["-DCOMPGEN_KENLM=ON", f"-DKENLM_QUERY_DIR={query}"]
    folder = _cache_root() / (_source_key() + ("-kenlm" if kenlm else ""))

    def build() -> None:
        # start-up: `compgen sample --backend cpp` loads no torch
        import torch.utils

        for tool in ("cmake", "c++"):   # needed to build only: a verified runner runs without
            if shutil.which(tool) is None:
                raise SettingError(f"'{tool}' not found: install cmake and a C++ compiler "
                                   "(apt-get install cmake g++) to use `backend` cpp")
        remove_stale_staging(folder)
        staged = folder.with_name(staging_prefix(folder) + "build")
        build_dir = staged / "build"
        log(f"building the C++ runner in {folder} (once, about a minute)")
        configure = ["cmake", "-S", str(SOURCE), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                     f"-DCMAKE_PREFIX_PATH={torch.utils.cmake_prefix_path}", *extra]
        try:
            for cmd in (configure, ["cmake", "--build", str(build_dir), "-j",
                                    str(os.cpu_count() or 1)]):
                result = subprocess.run(cmd, check=False, capture_output=True, text=True)
                if result.returncode != 0:
                    tail = (result.stderr or result.stdout).strip().splitlines()[-5:]
                    raise UserError("building the C++ runner failed: " + " | ".join(tail))
            for name in ("compgen-sample", "compgen-lm-score") if kenlm else ("compgen-sample",):
                shutil.copy2(build_dir / name, staged / name)
            shutil.rmtree(build_dir)
            os.replace(staged, folder)
        finally:
            shutil.rmtree(staged, ignore_errors=True)

    return cache.ensure(folder, "the C++ runner", build) / "compgen-sample"


@dataclass
class HarnessResult:
    kept: int
    rounds: int
    strategy: str
    temperature: float
    decode_seconds: float
    seconds: float
    output: str  # the samples TSV when no file was asked for
    lm_sentences: int = 0     # candidates the n-gram LM scored
    lm_seconds: float = 0.0   # spent scoring them
    rows: int = 0             # candidates decoded
    accepted: int = 0         # of them, passed the filter (before the n best are kept)


@dataclass
class RunnerResume:
    """Where an interrupted run of the job stood (``compgen.sampling.journal.Position``)
    in the runner's terms: the loop state after its last complete round and the samples
    accepted until then, in acceptance order, as (ids of x <sep> y, logprob)."""
    rounds: int
    first: int      # rows decoded: the next round's first sample index
    stalled: int
    mode: int
    temperature: float
    samples: list


def job_text(folder: Path, contract: Contract, options: SampleOptions, *, out: Path | None,
             filter_spec: dict | None = None, raw: bool = False, zero_latent: bool = False,
             model: Path | None = None, compiled: Path | None = None,
             tuples=None, max_rows: int | None = None,
             prototype_file: str = PROTOTYPE_FILE, journal: Path | None = None,
             resume: RunnerResume | None = None) -> str:
    """The runner's job (its standard input): the decoding contract, the sampling options
    (written here only, from ``options`` whole), the filter.
    ``model``: the TorchScript sampler to run instead of the folder's ``model.ts`` (the
    bf16 one of ``compgen.runtimes.reduced``); ``compiled``: a folder of the encoder and step
    compiled by AOTInductor, run instead of their TorchScript graphs
    (``compgen.runtimes.reduced.bf16_libraries``). ``tuples``: the stored-tuple indices
    the samples cycle through (``compgen.sampling.tuple_selection``; default all, in
    order) of ``prototype_file`` (the file of the job's length cut); ``max_rows``: rows
    decoded at most (one pass of a deterministic decoder).
    ``journal``: the job's ``OUT.partial``, every round appended to it
    (``compgen.sampling.journal``); ``resume``: go on from there, the journal's samples
    given to the filter again (logprobs exact: ``repr``)."""
    records = [("folder", Path(folder).resolve()), ("n", options.n),
               ("nsamples", options.nsamples), ("batch_size", options.batch_size),
               ("max_rounds", options.max_rounds or UNCAPPED_ROUNDS), ("seed", options.seed),
               ("mode", MODES[options.strategy]), ("temperature", repr(options.temperature)),
               ("raise_temperature", int(options.raise_temperature)), ("raw", int(raw)),
               ("zero_latent", int(zero_latent)),
               ("threads", options.threads or os.cpu_count() or 1),
               ("vocab_size", contract.vocab_size), ("max_len", contract.max_len),
               ("latent", contract.latent), ("beam_width", options.beam_width),
               ("prototypes", contract.prototypes),
               ("prototype_width", contract.prototype_width),
               ("vae_max_norm", repr(contract.vae_max_norm)),
               ("ids", [contract.bos, contract.eos, contract.pad, contract.sep]),
               ("first_step_masked", contract.first_step_masked),
               ("later_steps_masked", contract.later_steps_masked)]
    for name in STATE_NAMES:
        shape, dtype = contract.state[name]
        records.append(("state", [name, dtype, *shape]))
    if out is not None:
        records.append(("out", Path(out).resolve()))
    if model is not None:
        records.append(("model", Path(model).resolve()))
    if compiled is not None:
        records.append(("compiled", Path(compiled).resolve()))
    if prototype_file != PROTOTYPE_FILE:
        records.append(("prototypes_file", prototype_file))
    if tuples is not None:
        records.append(("tuples", list(tuples)))
    if max_rows is not None:
        records.append(("max_rows", max_rows))
    if journal is not None:
        records.append(("journal", Path(journal).resolve()))
    if resume is not None:
        records += [("resume_rounds", resume.rounds), ("resume_first", resume.first),
                    ("resume_stalled", resume.stalled), ("resume_mode", resume.mode),
                    ("resume_temperature", repr(resume.temperature))]
        records += [("resume_sample", [*ids, repr(logprob)]) for ids, logprob in resume.samples]
    records += list((filter_spec or {}).items())
    return "".join(job_record(key, value) for key, value in records)


def job_record(key: str, value) -> str:
    """One record of the runner's job: ``KEY BYTES\n`` then the value's UTF-8 bytes and a
    newline (cpp_runner/src/main.cpp ``next_record``). A list is its items space-joined;
    a path or string is taken whole, so a newline inside it cannot start a record."""
    if isinstance(value, list | tuple):
        value = " ".join(map(str, value))
    text = str(value)
    return f"{key} {len(text.encode('utf-8', 'surrogateescape'))}\n{text}\n"


def run_harness(binary: Path, job: str, log=print, out: Path | None = None,
                on_round: Callable[[int, int, int], None] | None = None) -> HarnessResult:
    """Run the whole sampling job in one runner process; its progress lines go to ``log``
    as they come, and ``on_round(rounds, rows decoded, accepted)`` is called after every
    round (the progress bar). ``out``: the job's output file (its staging file is removed
    if the run is cut short)."""
    # idle OpenMP threads sleep instead of spinning: on a shared machine spinning threads
    # wait for descheduled ones at every barrier (3x slower under load, measured)
    env = {"OMP_WAIT_POLICY": "PASSIVE", **os.environ, "COMPGEN_PARENT_PID": str(os.getpid())}
    try:
        returncode, stdout, stderr = _run_streaming(binary, job, env, log, on_round)
    finally:   # interrupted (the runner is killed with it): no staging file of it stays
        if out is not None:
            out = Path(out).resolve()
            out.with_name(f".{out.name}.{os.getpid()}.runner.tmp").unlink(missing_ok=True)
    result = subprocess.CompletedProcess([str(binary)], returncode, stdout, stderr)
    lines = result.stderr.strip().splitlines()
    if result.returncode < 0:   # killed from outside: a journal it kept stays for --resume
        number = -result.returncode
        name = signal.Signals(number).name if number in set(signal.Signals) else number
        raise Interrupted(f"C++ runner: killed by signal {name}")
    if result.returncode != 0:
        message = lines[-1] if lines else f"failed (exit {result.returncode})"
        raise UserError(f"C++ runner: {message.removeprefix('error: ')}")
    done = next((line.split()[1:] for line in reversed(lines) if line.startswith("done ")), None)
    if done is None:
        return HarnessResult(0, 1, "", 0.0, float("nan"), float("nan"), result.stdout)
    kept, rounds, mode, temperature, decode_seconds, seconds, lm_sentences, lm_seconds = done[:8]
    return HarnessResult(int(kept), int(rounds), MODE_NAMES[int(mode)], float(temperature),
                         float(decode_seconds), float(seconds), result.stdout,
                         int(lm_sentences), float(lm_seconds),
                         int(done[8]) if len(done) > 8 else 0,
                         int(done[9]) if len(done) > 9 else int(kept))


def _run_streaming(binary: Path, job: str, env: dict, log, on_round) -> tuple[int, str, str]:
    """The runner's exit status, standard output and error; its error lines are read as
    they come (a raised temperature is logged, a round's figures go to ``on_round``) while
    a thread drains its output. Anything raised here (Ctrl-C) kills the runner first."""
    proc = subprocess.Popen([str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env)
    try:
        chunks: list[bytes] = []
        drain = threading.Thread(target=lambda: chunks.append(proc.stdout.read()), daemon=True)
        drain.start()
        try:   # the runner reads its whole job before it writes anything
            proc.stdin.write(job.encode("utf-8", "surrogateescape"))
            proc.stdin.close()
        except BrokenPipeError:   # it stopped early: its error line says why
            pass
        errors = []
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            errors.append(line)
            figures = line.split()[1:]
            if line.startswith("round ") and on_round is not None and len(figures) == 3:
                on_round(*map(int, figures))   # (a line cut off by a kill is no progress)
            elif line.startswith("raised ") and len(figures) == 2:
                mode, temperature = figures
                log(f"no new samples: {MODE_NAMES[int(mode)]} sampling at T "
                    f"{float(temperature):g}")
        proc.wait()
        drain.join()
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        for stream in (proc.stdout, proc.stderr):
            stream.close()
    stdout = b"".join(chunks).decode("utf-8", "replace")
    return proc.returncode, stdout, "\n".join(line for line in errors if not line.startswith("round "))


def decode_with_runner(binary: Path, folder: Path, manifest: Manifest, protos, z, strategy: str,
                       max_len: int) -> list[list[int]]:
    """Decoded rows (ids) of the first ``len(protos)`` stored tuples with a zero latent,
    as the runner decodes them (export parity checks)."""
    contract = replace(manifest.contract(), max_len=max_len)
    options = SampleOptions(strategy=strategy, n=len(protos), batch_size=len(protos),
                            max_rounds=1, threads=1, seed=0, temperature=1.0,
                            beam_width=contract.beam_width)
    job = job_text(folder, contract, options, out=None, raw=True, zero_latent=True)
    text = run_harness(binary, job).output
    return [[int(t) for t in line.split("\t")[0].split()] for line in text.splitlines()]


def lm_score_binary(log=print) -> Path:
    """``compgen-lm-score``: KenLM's query library scoring sentences the way the Python
    scorer does (cpp_runner/src/kenlm_scorer.cpp), built with the KenLM runner."""
    return build_runner(log, kenlm=True).with_name("compgen-lm-score")


def score_with_cpp(pairs, lm_args: list[str], log=print) -> list[float]:
    """log10 scores of (x, y) pairs from ``compgen-lm-score`` (``lm_args``: its --lm options,
    ``compgen.lm.rerank.LmRanking.runner_args``)."""
    text = "".join(" ".join(x) + "\t" + " ".join(y) + "\n" for x, y in pairs)
    result = subprocess.run([str(lm_score_binary(log)), *lm_args], input=text,
                            capture_output=True, text=True, check=False)
    if result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise UserError((lines[-1] if lines else "compgen-lm-score failed").removeprefix("error: "))
    return [float(v) for v in result.stdout.split()]
