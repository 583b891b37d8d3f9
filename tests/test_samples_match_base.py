"""Same seed, same samples as commit 894b2c3: `compgen sample` on the shipped export writes, on
every backend, the samples 894b2c3 wrote with the same options (tests/data/samples_894b2c3,
whose README gives the commands): the same bytes where no row is stopped early
(STOPS_ROWS), else the same pairs in the same order, log-probabilities within 2e-5. Only the CLI is run, so the test holds whatever the
package's module layout."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"
REFERENCE = Path(__file__).parent / "data" / "samples_894b2c3"
BACKENDS = ("onnx", "torchscript", "cpp", "torch")
# every option explicit, so that no preset default changed since 894b2c3 enters
CASES = {
    "temperature-rare": "--strategy temperature --temperature 0.4 --resample rare --rare jump "
                        "--all-prototypes --n 16 --nsamples 16 --batch-size 32 --max-rounds 20 "
                        "--seed 3",
    "greedy": "--strategy greedy --resample none --n 8 --nsamples 8 --batch-size 32 "
              "--max-rounds 10 --seed 5",
    "beam-rare": "--strategy beam --beam-width 4 --resample rare --rare jump --all-prototypes "
                 "--n 8 --nsamples 8 --batch-size 32 --max-rounds 20 --seed 7",
}
COMMON = "--threads 1 --precision fp32 --no-test-dropout"
# 894b2c3 had no --device and sampled on the CPU
ON_CPU = ("--device", "cpu")


def sample(tmp_path: Path, case: str, backend: str, *extra: str) -> bytes:
    out = tmp_path / f"{case}.{backend}.tsv"
    empty = tmp_path / "no-data"   # an export reads the training pairs it ships
    empty.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--backend", backend,
               *CASES[case].split(), *COMMON.split(), *ON_CPU, "--data-dir", str(empty),
               *extra, "-o", str(out)]
    # the first cpp run of a checkout builds the C++ runner (a few minutes)
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1200,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stderr}"
    return out.read_bytes()


def reference_kernels() -> bool:
    """Whether this CPU runs the vector kernels the reference files were written with (AVX2
    and FMA, no AVX-512 or AMX): there the files must agree to the byte. oneDNN and ONNX
    Runtime pick wider kernels on other CPUs, whose sums may round the last printed digit of
    a log-probability the other way; there the pairs and their order must still agree, and
    each log-probability within 2e-5 (one unit of the last printed digit, rounded)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return False
    flags = set(next((line.split(":", 1)[1].split() for line in text.splitlines()
                      if line.startswith("flags")), []))
    return {"avx2", "fma"} <= flags and not flags & {"avx512f", "amx_tile"}


# Greedy and temperature searches stop a row as soon as its input is one the filter
# rejects (`compgen.decoding.search.GreedySearch.stop_input`, after 894b2c3): the rows that
# go on are then decoded in smaller batches, whose sums may round the last printed digit
# of a log-probability the other way. The beam search stops no row.
STOPS_ROWS = {"greedy", "temperature-rare"}


def assert_same_samples(got: bytes, want: bytes, what: str, to_the_byte: bool = True) -> None:
    if to_the_byte and reference_kernels():
        assert got == want, f"{what}: " + first_difference(got, want)
        return
    rows = [line.split("\t") for line in got.decode().splitlines()]
    wanted = [line.split("\t") for line in want.decode().splitlines()]
    assert [r[:2] for r in rows] == [w[:2] for w in wanted], f"{what}: " + first_difference(got, want)
    for r, w in zip(rows, wanted):
        if r[0].startswith("#"):   # the header line
            assert r == w, f"{what}: " + first_difference(got, want)
            continue
        assert abs(float(r[2]) - float(w[2])) <= 2e-5, f"{what}: " + first_difference(got, want)


def first_difference(got: bytes, want: bytes) -> str:
    got_lines, want_lines = got.decode().splitlines(), want.decode().splitlines()
    for number, (line, wanted) in enumerate(zip(got_lines, want_lines), 1):
        if line != wanted:
            return f"line {number} differs:\n  now:      {line!r}\n  894b2c3:  {wanted!r}"
    return f"{len(got_lines)} lines now, {len(want_lines)} at 894b2c3 (the common lines agree)"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", CASES)
def test_samples_are_the_bytes_of_894b2c3(case, backend, tmp_path):
    if backend == "cpp" and (shutil.which("cmake") is None or shutil.which("c++") is None):
        pytest.skip("the C++ runner needs cmake and a C++ compiler (c++) on PATH to build")
    want = (REFERENCE / f"{case}.{backend}.tsv").read_bytes()
    got = sample(tmp_path, case, backend)
    assert_same_samples(got, want, f"{case} on {backend}", case not in STOPS_ROWS)


def test_ray_sharded_samples_are_the_bytes_of_894b2c3(tmp_path):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'compgen[ray]')")
    want = (REFERENCE / "temperature-rare.onnx.tsv").read_bytes()  # Ray writes the one-process file
    got = sample(tmp_path, "temperature-rare", "onnx", "--ray", "local", "--ray-workers", "2")
    assert_same_samples(got, want, "temperature-rare on onnx over Ray",
                        "temperature-rare" not in STOPS_ROWS)


def test_the_reference_readme_states_these_commands():
    readme = (REFERENCE / "README.md").read_text(encoding="utf-8")
    assert "894b2c3" in readme and COMMON in readme
    for case, options in CASES.items():
        assert options in readme and f"{case}.$backend.tsv" in readme, case
    files = {p.name for p in REFERENCE.glob("*.tsv")}
    assert files == {f"{c}.{b}.tsv" for c in CASES for b in BACKENDS}
