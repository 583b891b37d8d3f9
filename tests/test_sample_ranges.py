"""Sampling options have one meaning everywhere or are refused: a seed is a signed 64-bit
integer, read as its two's complement by Python and by the C++ runner alike (2^70 is an
error, never seed 0); a temperature is finite and >= 1e-6 (NaN, inf, subnormal: one error
line before any decoding)."""

import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compgen.cli.common import flag_of
from compgen.decoding.options import SampleOptions
from compgen.decoding.random_stream import SEED_MAX, SEED_MIN, check_seed, uniform
from compgen.errors import SettingError
from compgen.sampling.run import sample_export

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"


def compgen(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "compgen", *map(str, args)], capture_output=True,
                          text=True, env=env, check=False)


@pytest.mark.parametrize("temperature", [math.nan, math.inf, -math.inf, 1e-320, 0.0, -1.0])
def test_bad_temperatures_are_refused_where_options_are_built(temperature):
    # the library names the setting, the command line its flag
    with pytest.raises(SettingError, match="^temperature ") as refused:
        SampleOptions.resolve({}, strategy="temperature", temperature=temperature)
    assert refused.value.text(flag_of).startswith("--temperature ")


@pytest.mark.parametrize("seed", [2**63, 2**64, 2**70, -(2**63) - 1])
def test_seeds_outside_64_bits_are_refused(seed):
    with pytest.raises(SettingError, match="^seed "):
        check_seed(seed)
    with pytest.raises(SettingError, match="^seed ") as refused:
        SampleOptions.resolve({}, seed=seed)
    assert refused.value.text(flag_of).startswith("--seed ")


def test_every_seed_in_range_has_its_own_stream():
    seeds = [SEED_MIN, -1, 0, 1, SEED_MAX]
    assert [check_seed(s) for s in seeds] == seeds
    draws = [uniform(s, np.arange(4), np.arange(4)) for s in seeds]
    assert len({d.tobytes() for d in draws}) == len(seeds)


@pytest.mark.parametrize("args,needle", [
    (["-T", "nan"], "--temperature"), (["-T", "inf"], "--temperature"),
    (["-T", "1e-320"], "--temperature"), (["--seed", str(2**70)], "--seed"),
    (["--seed", str(2**63)], "--seed")])
def test_cli_refuses_bad_sampling_options_in_one_line(args, needle, tmp_path):
    proc = compgen("sample", SHIPPED, "--n", "2", "--strategy", "temperature", *args,
                   "-o", tmp_path / "s.tsv")
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert needle in lines[0]
    assert not any(tmp_path.iterdir())


def test_other_commands_refuse_seeds_outside_64_bits(tmp_path):
    for args in (["train", "generator", "--data", "scan/jump", "--max-steps", "1", "-o",
                  tmp_path / "g.pt", "--seed", 2**70],
                 ["augment", "geca", "scan/jump", "--n-sample", "5", "-o", tmp_path / "g.tsv",
                  "--seed", -(2**64)],
                 ["pipeline", "scan", "--seeds", f"0-{2**70}", "--root", tmp_path / "r"]):
        proc = compgen(*args)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and len(lines) == 1 and "--seed" in lines[0], proc.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("seed", [SEED_MIN, SEED_MAX])
def test_extreme_seeds_give_the_same_samples_on_every_backend(seed, tmp_path):
    outputs = {}
    for backend in ("onnx", "cpp"):
        out = tmp_path / f"{backend}.tsv"
        sample_export(SHIPPED, n=12, backend=backend, out=out, strategy="temperature",
                      temperature=1.5, seed=seed, threads=1, log=lambda m: None)
        # the pairs; the scores differ between backends in their last printed digit
        outputs[backend] = [line.split("\t")[:2] for line in out.read_text().splitlines()]
    assert outputs["onnx"] == outputs["cpp"]
    assert len(outputs["onnx"]) >= 12


def test_the_command_line_writes_settings_as_flags_and_leaves_quoted_text_alone():
    import typer.main

    from compgen.cli.common import app, flags_in

    error = SettingError("`oracle` 'judge.py': exit status 1 (NameError: `foo_bar` undefined); "
                         "`nsamples` 10 must be >= `n` 20")
    assert str(error) == ("oracle 'judge.py': exit status 1 (NameError: foo_bar undefined); "
                          "nsamples 10 must be >= n 20")
    assert flags_in(error, typer.main.get_command(app)) == (
        "--oracle 'judge.py': exit status 1 (NameError: `foo_bar` undefined); "
        "--nsamples 10 must be >= --n 20")
