"""Export: every backend against the eager model, and clear errors for broken artifacts."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from compgen.data import load_dataset
from compgen.data.vocab import Vocab
from compgen.decoding.contract import Contract
from compgen.decoding.samplers import Temperature
from compgen.decoding.search import GreedySearch, decode
from compgen.errors import UserError
from compgen.export.kinds import export_checkpoint
from compgen.runtimes.artifact import load_manifest, read_prototypes
from compgen.runtimes.cpp import build_runner
from compgen.runtimes.eager import banned_mask
from compgen.runtimes.graphs import deterministic
from compgen.runtimes.onnx import OnnxGenerator
from compgen.runtimes.recorded_outputs import pad_tuples
from compgen.runtimes.torchscript import TorchScriptGenerator
from compgen.training.checkpoint import (
    build_recombine,
    load_generator,
    load_preset,
    save_checkpoint,
)

COMPGEN = [sys.executable, "-m", "compgen"]


def make_checkpoint(path, data_dir, nproto=2, variant="scan", vae=False):
    config = load_preset("recombine_scan_cpu" if variant == "scan" else "recombine_sig_cpu")
    config["data"] = "scan/jump"
    config["model"].update(nproto=nproto, hidden=32, embed=16, vae=vae, variant=variant,
                           attdim=16 if variant == "scan" else 32)  # sig: attdim == hidden
    vocab = Vocab.from_table(load_dataset("scan/jump", data_dir))
    torch.manual_seed(0)
    model = build_recombine(config, len(vocab))
    save_checkpoint(path, model, config, vocab, "recombine")
    return path


@pytest.fixture(scope="module")
def runner():
    return build_runner(log=lambda m: None)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, small_scan, runner):
    work = tmp_path_factory.mktemp("export")
    ckpt = make_checkpoint(work / "recomb2.pt", small_scan)
    manifest = export_checkpoint(ckpt, work / "out", parity_sets=64, data_dir=small_scan,
                                 cpp_binary=runner)
    return ckpt, work / "out", manifest


def test_export_writes_a_validated_artifact(exported):
    _, folder, manifest = exported
    names = {p.name for p in folder.iterdir()}
    assert {"manifest.json", "model.ts", "prototypes.onnx", "encoder.onnx",
            "decoder_step.onnx", "vocab.json", "vocab.txt", "prototypes.txt", "train.tsv"} <= names
    contract = Contract.from_manifest(manifest.decoding)  # the contract round-trips
    assert contract.to_manifest() == {k: v for k, v in manifest.decoding.items()
                                      if k in contract.to_manifest()}
    assert load_manifest(folder) == manifest   # read back as it was written
    assert (folder / "manifest.json").read_text() == json.dumps(manifest.to_json(), indent=2)
    parity = manifest.parity
    assert parity["sets"] == 64
    for name in ("torchscript", "onnx", "cpp"):
        assert parity["backends"][name]["greedy_identical"] is True
        assert parity["backends"][name]["beam_identical"] is True
    for name in ("torchscript", "onnx"):
        assert parity["backends"][name]["beam_identical"] is True
        assert parity["backends"][name]["max_abs_logp_diff"] <= parity["tolerance"]
    inputs = {i["name"]: i for i in manifest.graphs["decoder_step.onnx"]["inputs"]}
    assert inputs["keys"]["shape"][0] == "batch" and inputs["keys"]["shape"][2] == "proto_len"
    rows = manifest.graphs["prototypes.onnx"]["inputs"][0]  # one prototype per row
    assert rows["name"] == "seqs" and rows["shape"] == ["sequences", "proto_len"]


@pytest.mark.parametrize("variant,nproto,vae", [("scan", 0, False), ("scan", 1, True),
                                                ("sig", 2, False)])
def test_other_generators_export(tmp_path, small_scan, variant, nproto, vae):
    ckpt = make_checkpoint(tmp_path / "g.pt", small_scan, nproto, variant, vae)
    manifest = export_checkpoint(ckpt, tmp_path / "out", parity_sets=16, data_dir=small_scan)
    for f in manifest.parity["backends"].values():
        assert f["greedy_identical"] and f["beam_identical"]


def first_step_frequencies(draw, n_rows, vocab_size):
    counts = np.bincount(draw, minlength=vocab_size)
    return counts / n_rows


def test_temperature_sampling_matches_the_model_distribution(exported):
    """Every backend's sampled first tokens follow the eager model's distribution."""
    ckpt, folder, manifest = exported
    model = deterministic(load_generator(ckpt)[0])
    tuples = read_prototypes(folder / "prototypes.txt", 2)[:1] * 4000
    protos = pad_tuples(tuples, 2, len(tuples))
    z = torch.zeros(len(tuples), model.latent)
    with torch.no_grad():
        memory, state = model.encode(protos[:1], z[:1], 4)
        logp, _ = model.decode_step(torch.ones(1, dtype=torch.long), state, memory)
    p = torch.softmax(logp.masked_fill(banned_mask(model.vocab_size, True), float("-inf")), 1)[0]
    p = p.numpy()
    bound = 5 * np.sqrt(p * (1 - p) / len(tuples)) + 1e-3
    contract = Contract.from_manifest(manifest.decoding)
    p_np, z_np = protos.numpy(), z.numpy()

    def first_tokens(gen, seed):
        return decode(gen.stepper(), contract, p_np, z_np, GreedySearch(Temperature(1.0, seed)),
                      max_len=1)[0][:, 0]

    ts = TorchScriptGenerator(folder, manifest)
    onnx = OnnxGenerator(folder, manifest)
    ts_first, ort_first = first_tokens(ts, 1), first_tokens(onnx, 1)
    for draws in (ts_first, ort_first):
        freq = first_step_frequencies(draws, len(tuples), model.vocab_size)
        assert np.all(np.abs(freq - p) <= bound), (freq, p)
    # the same seed gives the same draws on both backends, a different seed different ones
    assert np.array_equal(ts_first, ort_first)
    assert np.array_equal(first_tokens(onnx, 1), ort_first)
    assert not np.array_equal(first_tokens(onnx, 2), ort_first)


def run_cli(*args):
    return subprocess.run(COMPGEN + list(args), capture_output=True, text=True, check=False,
                          env={**os.environ}, timeout=600)


def test_corrupted_artifacts_give_one_clear_error(exported, tmp_path, damaged_copy):
    _, folder, _ = exported
    broken = damaged_copy(folder, "decoder_step.onnx")
    with pytest.raises(UserError, match="decoder_step.onnx: checksum does not match"):
        load_manifest(broken)

    vocab = Vocab.load(folder / "vocab.json")
    Vocab(vocab.tokens + ["EXTRA"]).save(tmp_path / "vocab.json")
    mismatch = damaged_copy(folder, "vocab.json", (tmp_path / "vocab.json").read_bytes())
    with pytest.raises(UserError, match="the manifest says"):
        load_manifest(mismatch)

    garbage = damaged_copy(folder, "encoder.onnx", b"not an onnx file")
    with pytest.raises(UserError, match="encoder.onnx: cannot load ONNX graph"):
        OnnxGenerator(garbage, load_manifest(garbage))


def test_export_cli_errors(tmp_path):
    no_config = tmp_path / "plain.pt"
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2)}, str(no_config))
    result = run_cli("export", str(no_config), "--no-cpp", "-o", str(tmp_path / "x"))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and "not a compgen checkpoint" in result.stderr
    assert not (tmp_path / "x").exists()
    result = run_cli("export", str(tmp_path / "missing.pt"), "--no-cpp")
    assert result.returncode == 2 and "no such checkpoint" in result.stderr


def test_sample_cli_on_an_export_folder(exported, small_scan, tmp_path):
    ckpt, folder, _ = exported
    out = tmp_path / "s.tsv"
    result = run_cli("sample", str(folder), "--backend", "onnx", "--n", "2", "--strategy",
                     "temperature", "--batch-size", "64", "--data-dir", str(small_scan),
                     "-o", str(out))
    assert result.returncode == 0, result.stderr
    rows = [line for line in out.read_text().splitlines() if not line.startswith("#")]
    assert 1 <= len(rows) <= 2
    result = run_cli("sample", str(folder), "--backend", "tensorflow")
    assert result.returncode == 2 and "valid: onnx, torchscript, cpp, torch" in result.stderr
    result = run_cli("sample", str(ckpt), "--backend", "onnx")
    assert result.returncode == 2 and "first run 'compgen export" in result.stderr
