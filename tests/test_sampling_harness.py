"""One seed, one result: the four backends keep the same samples from the shipped export
for every strategy; the C++ runner does a whole job in one process; sampling and export
leave nothing in the system's temporary folder."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compgen.io import parse_samples_tsv
from compgen.runtimes.cpp import build_runner
from compgen.sampling.run import BACKENDS, sample_export
from compgen.system.precision import cpu_has_bf16

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"
STRATEGIES = ("greedy", "temperature", "mixed", "beam")


@pytest.fixture(scope="module")
def runner():
    return build_runner(log=lambda m: None)


def read_rows(path: Path) -> list[tuple[list[str], list[str], float]]:
    text = path.read_text(encoding="utf-8")
    scores = [float(line.rsplit("\t", 1)[1]) for line in text.splitlines()
              if line and not line.startswith("#")]
    return [(x, y, s) for (x, y), s in zip(parse_samples_tsv(text), scores)]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_backend_keeps_the_same_samples(strategy, runner, tmp_path, one_torch_thread):
    rows = {}
    for backend in BACKENDS:
        out = tmp_path / f"{backend}.tsv"
        sample_export(SHIPPED, n=12, backend=backend, strategy=strategy, temperature=0.7,
                      nsamples=12, batch_size=16, seed=5, out=out, threads=1,
                      log=lambda m: None)
        rows[backend] = read_rows(out)
    reference = rows["torch"]
    assert len(reference) == 12
    for backend, got in rows.items():
        assert [(x, y) for x, y, _ in got] == [(x, y) for x, y, _ in reference], backend
        assert all(abs(a[2] - b[2]) <= 1e-4 for a, b in zip(got, reference)), backend


def test_the_seed_decides_the_temperature_samples(runner, tmp_path):
    found = []
    for seed in (1, 1, 2):
        run = sample_export(SHIPPED, n=8, backend="onnx", strategy="temperature", nsamples=8,
                            batch_size=16, seed=seed, threads=1, log=lambda m: None)
        found.append([(s.x, s.y) for s in run.samples])
    assert found[0] == found[1] and found[0] != found[2]


def test_cpp_sample_is_one_runner_process(runner, tmp_path, monkeypatch):
    """Several rounds (batch 8, 40 samples) and still one process: the model is loaded
    once, the filters run inside it."""
    started = []

    class CountingPopen(subprocess.Popen):   # every child process (subprocess.run's too)
        def __init__(self, cmd, *args, **kwargs):
            started.append(cmd)
            super().__init__(cmd, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", CountingPopen)
    run = sample_export(SHIPPED, n=40, backend="cpp", strategy="temperature", nsamples=40,
                        batch_size=8, seed=0, threads=1, out=tmp_path / "s.tsv",
                        log=lambda m: None)
    assert len(run.samples) == 40
    assert [cmd[0] for cmd in started] == [str(runner)]
    # the runner's setup (here: checking the built binary) is timed apart from sampling
    assert 0 < run.build_seconds < run.seconds


def temp_env(tmpdir: Path) -> dict:
    """This environment with ``tmpdir`` as the system temp dir (and torch's compiler cache
    where compgen itself puts it: this process's setting is not inherited)."""
    env = {k: v for k, v in os.environ.items() if k != "TORCHINDUCTOR_CACHE_DIR"}
    return {**env, "TMPDIR": str(tmpdir), "TEMP": str(tmpdir), "TMP": str(tmpdir)}


def run_cli(args, tmpdir: Path):
    env = temp_env(tmpdir)
    return subprocess.run([sys.executable, "-m", "compgen", *args], capture_output=True,
                          text=True, env=env, check=False, timeout=900)


def test_sample_and_export_leave_no_temporary_folder(runner, tmp_path):
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    out = tmp_path / "s.tsv"
    ok = run_cli(["sample", str(SHIPPED), "--backend", "cpp", "--n", "8", "--batch-size", "16",
                  "--threads", "1", "-o", str(out)], system_tmp)
    assert ok.returncode == 0, ok.stderr
    failed = run_cli(["sample", str(SHIPPED), "--backend", "cpp", "--n", "8", "--max-rounds",
                      "1", "--batch-size", "1", "--resample", "rare", "--rare", "no such word",
                      "--threads", "1"], system_tmp)
    assert failed.returncode == 2 and failed.stderr.startswith("error: ")
    again = run_cli(["export", str(SHIPPED), "-o", str(tmp_path / "again"), "--parity-sets",
                     "8"], system_tmp)
    assert again.returncode == 0, again.stderr
    broken = run_cli(["export", str(tmp_path / "missing.pt"), "--no-cpp"], system_tmp)
    assert broken.returncode == 2
    if cpu_has_bf16():  # the compiled bf16 graphs (AOTInductor) and the bf16 TorchScript
        bf16 = run_cli(["sample", str(SHIPPED), "--backend", "cpp", "--precision", "bf16",
                        "--n", "8", "--threads", "1", "-o", str(out)], system_tmp)
        assert bf16.returncode == 0, bf16.stderr
    # torch makes its compiler's cache folder in the temp dir when an optimizer is built
    # (training); compgen's trainers point it at the user's cache first, as here (importing
    # compgen alone changes no environment variable)
    subprocess.run([sys.executable, "-c", ("import torch; from compgen.io import "
                                           "keep_torch_compiler_cache as keep; keep(); "
                                           "torch.optim.Adam(torch.nn.Linear(2, 2).parameters())")],
                   env=temp_env(system_tmp), check=True)
    # onnxruntime's own library writes one fixed-name file, ".ses", into the temp folder
    # when it is imported (reused, not one per run); everything else must be gone
    assert [p.name for p in system_tmp.iterdir() if p.name != ".ses"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again", "s.tsv", "system-tmp"]


def test_options_are_resolved_once_from_the_preset_and_the_caller():
    from compgen.decoding.options import SampleOptions
    from compgen.errors import UserError

    config = {"sample": {"strategy": "beam", "beam_width": 6, "n": 400, "nsamples": 500,
                         "rare": "jump", "temperature": 0.4}}
    options = SampleOptions.resolve(config, n=800, beam_width=None, temperature=0.9)
    assert (options.strategy, options.beam_width, options.rare) == ("beam", 6, "jump")
    assert (options.n, options.nsamples, options.temperature) == (800, 1000, 0.9)
    assert SampleOptions.resolve({}, strategy="mixed").strategy == "mixed"
    with pytest.raises(UserError, match="beam_width must be >= 1"):
        SampleOptions.resolve(config, beam_width=0)
    with pytest.raises(UserError, match="nsamples 10 must be >= n 20"):
        SampleOptions.resolve(config, n=20, nsamples=10)


def test_beam_width_one_is_greedy_and_the_width_is_used(runner):
    def kept(**options):
        run = sample_export(SHIPPED, n=10, backend="onnx", nsamples=10, batch_size=16,
                            seed=0, threads=1, log=lambda m: None, **options)
        return [(s.x, s.y, round(s.logprob, 4)) for s in run.samples]

    greedy = kept(strategy="greedy")
    assert kept(strategy="beam", beam_width=1) == greedy
    wide = kept(strategy="beam", beam_width=4)
    assert wide != greedy


def test_each_distinct_prototype_is_encoded_once(one_torch_thread):
    """A prototype shared by tuples, met twice in a batch or again in a later batch runs
    through the prototype encoder once; a cache of one prototype's size keeps only the
    last; either way the memory equals the eager model's encoding of the batch."""
    import numpy as np
    import torch

    from compgen.export.generator import pad_tuples
    from compgen.runtimes.artifact import eager_model, load_manifest, read_prototypes
    from compgen.runtimes.onnx import OnnxGenerator

    manifest = load_manifest(SHIPPED)
    width = manifest.prototype_width
    tuples = read_prototypes(SHIPPED / "prototypes.txt", 2)[:16]
    protos = pad_tuples(tuples + tuples[:4], 2, 20, width).numpy()
    distinct = {tuple(p) for tup in tuples for p in tup}
    z = np.zeros((20, manifest.latent), np.float32)
    gen = OnnxGenerator(SHIPPED, manifest, threads=1)
    memory = gen.encode(protos, z)
    assert gen.cache.encoded == len(distinct) < 32
    last = next(reversed(gen.cache.store))   # the last prototype a round keeps
    one = gen.cache.nbytes(gen.cache.store[last])
    gen.encode(protos[::-1].copy(), z)
    assert gen.cache.encoded == len(distinct)

    model = eager_model(SHIPPED, manifest)[0]
    with torch.no_grad():
        eager, _ = model.encode(torch.from_numpy(protos), torch.from_numpy(z), 0)
    np.testing.assert_allclose(memory["keys"], eager.keys.numpy(), atol=1e-5)
    np.testing.assert_allclose(memory["values"], eager.values.numpy(), atol=1e-5)

    small = OnnxGenerator(SHIPPED, manifest, threads=1)
    small.cache.budget = one
    again = small.encode(protos, z)
    assert list(small.cache.store) == [last] and small.cache.size == one
    np.testing.assert_array_equal(again["keys"], memory["keys"])


@pytest.mark.parametrize("backend", ["onnx", "torchscript"])
def test_the_memory_kept_per_prototype_is_the_batch_encoders_to_the_bit(backend,
                                                                        one_torch_thread):
    """fp32 CPU graphs keep the attention keys, values and mask of a prototype met in a
    second round (every slot) and gather them per tuple; the memory and the initial state
    are the bits the encoder graph gives for the whole batch: in a first round (batch-wide,
    nothing kept), a round of prototypes met before (each run once in every slot, then
    gathered), a round finding them all kept (nothing computed), a round of mostly kept
    ones, some in the other slot (only the new ones computed), and a batch-wide round of
    mostly new ones among kept ones (their kept rows in place of the graph's)."""
    import numpy as np

    from compgen.decoding.prototypes import REVISITING, PrototypeCache
    from compgen.export.generator import pad_tuples
    from compgen.runtimes.artifact import load_manifest, read_prototypes
    from compgen.runtimes.onnx import OnnxGenerator
    from compgen.runtimes.torchscript import TorchScriptGenerator

    manifest = load_manifest(SHIPPED)
    width = manifest.prototype_width
    stored = read_prototypes(SHIPPED / "prototypes.txt", 2)
    make = OnnxGenerator if backend == "onnx" else TorchScriptGenerator
    gen = make(SHIPPED, manifest, threads=1)
    assert gen.cache.ops is not None
    batchwide = PrototypeCache(gen._encode_sequences, gen._encode_tuples)

    def distinct(tuples):
        return {tuple(p) for t in tuples for p in t}

    swapped = [tuple(reversed(t)) for t in stored[:6]]
    before = distinct(stored[:40] + stored[50:54])
    # every stored tuple shares a short prototype with these: pair long ones not met yet
    long_ones = [t[0] for t in stored[1000:] if not distinct([t[:1]]) & before]
    unmet = list(zip(long_ones[0:80:2], long_ones[1:80:2]))
    rounds = [stored[:40] + stored[:8], stored[:40], stored[:40],
              stored[:40] + swapped + stored[50:54], stored[:1] + unmet]
    computed = []
    for tuples in rounds:
        protos = pad_tuples(tuples, 2, len(tuples), width).numpy()
        z = np.zeros((len(tuples), manifest.latent), np.float32)
        before = gen.cache.memory_rows
        got_round, whole = gen.cache(protos, z), batchwide(protos, z)
        computed.append(gen.cache.memory_rows - before)
        for name in ("keys", "values", "mask", "h", "c"):
            got, want = np.asarray(got_round[name]), np.asarray(whole[name])
            assert got.dtype == want.dtype, name
            np.testing.assert_array_equal(got, want, err_msg=name)
    first = distinct(stored[:40])
    new = distinct(stored[50:54]) - first
    assert computed == [2 * 48, 2 * len(first), 0, 2 * len(new), 2 * 41]
    last = distinct(rounds[-1])   # nearly all new, one tuple's kept
    assert len(last & first) * REVISITING < len(last) and len(last & first) > 0
    assert gen.cache.encoded == batchwide.encoded
    assert all((row.encoded is None) != (row.memory is None)
               for row in gen.cache.store.values())


def test_the_cpp_path_of_a_checked_export_loads_no_torch(runner, tmp_path):
    """The backend check of a folder is recorded once passed; after it, ``--backend cpp``
    does its job without importing torch (a second of the process otherwise)."""
    sample_export(SHIPPED, n=4, backend="cpp", nsamples=4, batch_size=8, threads=1,
                  log=lambda m: None)
    code = ("import sys\nfrom compgen.sampling.run import sample_export\n"
            f"run = sample_export({str(SHIPPED)!r}, n=4, backend='cpp', nsamples=4, "
            "batch_size=8, threads=1, log=lambda m: None)\n"
            "print(len(run.samples), 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["4", "False"]


def test_a_runner_built_for_another_torch_folder_is_not_reused(monkeypatch, tmp_path):
    """The binary finds libtorch by the absolute path it was built with, so a cached runner
    of another environment (a deleted clone's .venv) would fail to load: the cache key
    names the torch folder as well as the sources and version."""
    import importlib.util

    from compgen.runtimes import cpp as cpp_runner

    here = cpp_runner._source_key()
    real = importlib.util.find_spec("torch")
    moved = importlib.machinery.ModuleSpec("torch", None,
                                           origin=str(tmp_path / "torch" / "__init__.py"))
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: moved if name == "torch" else real)
    assert cpp_runner._source_key() != here
