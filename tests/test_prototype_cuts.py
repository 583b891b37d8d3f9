"""Omega's length cuts on export folders: an export stores the tuples of every cut, and
``--prototype-cut`` decodes the tuples drawn with it, on every backend.

The shipped generator's folder predates the stored cuts (it holds the mean cut only);
exported again it stores every cut (drawn from the SCAN training data)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compgen.decoding.options import SampleOptions
from compgen.errors import SettingError, UserError
from compgen.export.kinds import export_checkpoint
from compgen.runtimes.artifact import load_manifest, read_prototypes
from compgen.runtimes.cpp import build_runner
from compgen.runtimes.manifest_file import write_manifest_json
from compgen.sampling.run import ExportDecoder, sample_export
from compgen.sampling.tuple_selection import read_prototype_array

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"
BACKENDS = ("onnx", "torchscript", "torch", "cpp")
CUTS = ("mean", "mean+std", "none")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, require_data, data_dir):
    require_data(data_dir / "scan")
    out = tmp_path_factory.mktemp("cuts") / "recomb2"
    export_checkpoint(SHIPPED, out, parity_sets=8, data_dir=data_dir, log=lambda m: None)
    return out


def longest(path):
    return max(len(p) for tup in read_prototypes(path, 2) for p in tup)


def test_an_export_stores_the_tuples_of_every_cut(exported):
    cuts = load_manifest(exported).prototype_cuts
    assert cuts["mean"].file == "prototypes.txt"
    assert (exported / "prototypes.txt").read_bytes() == (SHIPPED / "prototypes.txt").read_bytes()
    assert cuts["mean+std"].file == "prototypes.mean+std.txt"
    assert cuts["none"].file == "prototypes.none.txt"
    for cut in cuts.values():
        path = exported / cut.file
        assert len(read_prototypes(path, 2)) == cut.prototypes == 25_600
        assert longest(path) == cut.prototype_width
    # a wider cut admits longer prototypes
    widths = [cuts[c].prototype_width for c in CUTS]
    assert widths[0] < widths[1] < widths[2]


def test_the_cut_decides_which_tuples_a_job_decodes(exported):
    manifest = load_manifest(exported)
    for cut in CUTS:
        entry = manifest.prototype_cuts[cut]
        options = SampleOptions(manifest.config["sample"], prototype_cut=cut, device="cpu")
        decoder = ExportDecoder(exported, manifest, "onnx", options)
        expected = read_prototype_array(exported / entry.file, 2, entry.prototype_width)
        assert np.array_equal(decoder.stored, expected)


@pytest.mark.parametrize("cut", ["none"])
def test_every_backend_keeps_the_same_samples_for_a_cut(exported, tmp_path, cut):
    build_runner(log=lambda m: None)
    pairs = {}
    for backend in BACKENDS:
        out = tmp_path / f"{backend}.tsv"
        run = sample_export(exported, n=30, backend=backend, strategy="temperature",
                            temperature=1.0, resample="none", max_rounds=2,
                            prototype_cut=cut, log=lambda m: None, out=out)
        assert run.tuples.endswith(" prototype tuples")
        pairs[backend] = [line.split("\t")[:2] for line in out.read_text().splitlines()
                          if not line.startswith("#")]
    assert len(pairs["onnx"]) == 30
    for backend in BACKENDS[1:]:
        assert pairs[backend] == pairs["onnx"], backend
    # the rare rule and the tuple selection work on the cut's tuples too
    run = sample_export(exported, n=5, strategy="greedy", resample="rare",
                        prototype_cut=cut, log=lambda m: None)
    assert run.samples and all("jump" in s.x for s in run.samples)
    assert run.tuples.split(" of ")[1].startswith("25,600 ")


def test_an_export_without_the_cut_is_one_error_line(tmp_path):
    """The shipped folder predates the stored cuts: one line saying how to get them."""
    proc = subprocess.run([sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--n", "3",
                           "--prototype-cut", "none", "-o", str(tmp_path / "s.tsv")],
                          check=False, capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --prototype-cut none: this export "
                                                   "stores prototype tuples drawn with the mean "
                                                   "cut only"), proc.stderr
    assert not (tmp_path / "s.tsv").exists()
    with pytest.raises(SettingError, match="prototype_cut mean\\+std: this export stores"):
        sample_export(SHIPPED, n=3, prototype_cut="mean+std", log=lambda m: None)


def test_a_cut_file_outside_the_checked_files_is_refused(exported, tmp_path):
    moved = tmp_path / "moved"
    shutil.copytree(exported, moved)
    manifest = json.loads((moved / "manifest.json").read_text())
    manifest["decoding"]["prototype_cuts"]["none"]["file"] = "../prototypes.txt"
    write_manifest_json(moved, manifest)
    with pytest.raises(UserError, match=r"prototype_cuts.none.file = '../prototypes.txt'"):
        sample_export(moved, n=3, prototype_cut="none", log=lambda m: None)
