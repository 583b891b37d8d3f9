"""The generator shipped in exported/scan-jump-recomb2: its checksums hold, and every
backend samples correct SCAN pairs from it with nothing but the package (embedded SCAN
jump and grammar; an empty data folder)."""

import shutil
from pathlib import Path

import pytest

from compgen.errors import UserError
from compgen.runtimes.artifact import load_manifest
from compgen.runtimes.cpp import build_runner
from compgen.sampling.collection import scan_quality
from compgen.sampling.run import BACKENDS, sample_export

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"
N = 24  # one or two rounds of 32 beams per backend: the test stays short
# Correct share of these N beam samples (seed 0, batch 32, embedded data, the preset's
# resampling by 'jump': the stored pairs that hold it), measured: 0.750 (18 of 24) on every
# backend, which keep the same samples; the floor sits a few points below (one more wrong
# sample would still pass).
MIN_CORRECT_SHARE = 0.70


def test_shipped_export_verifies_its_checksums(tmp_path):
    manifest = load_manifest(SHIPPED)  # every file against its sha256 in the manifest
    assert manifest.config["data"] == "scan/jump"
    assert manifest.nproto == 2 and manifest.hidden == 256
    damaged = tmp_path / "damaged"
    shutil.copytree(SHIPPED, damaged)
    with open(damaged / "prototypes.txt", "ab") as f:
        f.write(b"1 2 3\t4 5 6\n")
    with pytest.raises(UserError, match="prototypes.txt: checksum does not match"):
        load_manifest(damaged)


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_backend_samples_correct_scan_pairs(backend, tmp_path):
    if backend == "cpp":
        build_runner(log=lambda m: None)  # once per checkout (~1 min), then cached
    empty = tmp_path / "no-data"  # the export must not need a data folder
    empty.mkdir()
    run = sample_export(SHIPPED, n=N, backend=backend, nsamples=N, batch_size=32, seed=0,
                        threads=1, log=lambda m: None)
    quality = scan_quality(run, empty)
    assert len(run.samples) == N
    assert quality["novel_share"] == 1.0
    assert quality["correct_share"] >= MIN_CORRECT_SHARE, quality
