"""Typed preset sections: every shipped preset reads into its dataclasses; an unknown key,
section or a value of the wrong type is one error line naming it (exit 2 from the CLI)
before any data is read."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from compgen.augment.geca import GecaConfig, make_config
from compgen.augment.geca import load_preset as load_geca_preset
from compgen.configs import GeneratorTrainConfig, read_section
from compgen.decoding.options import RUN_ONLY, SampleOptions
from compgen.errors import UserError
from compgen.training.checkpoint import (
    CONFIG_DIR,
    check_preset,
    load_preset,
    preset_names,
    preset_sections,
)
from compgen.training.generator import train_generator

ROOT = Path(__file__).resolve().parents[1]
TRAIN_KEYS = ("batch_size, checkpoint_seconds, dev_fraction, epochs, fused_decoder, gradnorm, "
              "length_buckets, log_every, lr, lrdecay, max_missing, native_loops, neighborhood, "
              "packed_encoder, pad_chains, patience, precision, prefetch, restore_best, seed, "
              "similarity, threads, unique_prototypes")


def compgen(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "COMPGEN_DATA": str(Path(cwd) / "no-data")}
    return subprocess.run([sys.executable, "-m", "compgen", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, check=False, timeout=300)


def write_preset(folder: Path, text: str) -> str:
    """A preset file ``mine.toml`` in ``folder`` (the current directory of the tests that
    load it, so messages name it as ``mine.toml``)."""
    (folder / "mine.toml").write_text(text)
    return "mine.toml"


def test_every_shipped_preset_reads_into_its_sections():
    model_presets = [n for n in preset_names() if not n.startswith("geca_")]
    # the glob finds the shipped files (a wrong folder would make the loop vacuous)
    assert {"recombine_scan", "proto_scan", "seq2seq_scan_cpu", "seq2seq_scan_csl_cpu"} <= set(model_presets)
    for name in model_presets:
        doc = load_preset(name)
        for section, cls in preset_sections(doc["kind"]).items():
            typed = read_section(cls, doc.get(section, {}), name, skip=("vocab_size",))
            for key, value in doc.get(section, {}).items():
                assert getattr(typed, key) == value, (name, section, key)
    for name in ("scan", "lm", "lm-na", "semparse", "semparse-logic"):
        assert isinstance(make_config(name), GecaConfig)


def test_an_unknown_train_key_names_the_key_and_the_valid_ones(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_preset(tmp_path, 'kind = "recombine"\n[train]\nbatchsize = 8\n')
    with pytest.raises(UserError) as info:
        load_preset(path)
    assert str(info.value) == (f"mine.toml [train]: unknown option 'batchsize' "
                               f"(valid: {TRAIN_KEYS})")


def test_unknown_sections_sample_keys_model_keys_and_types_are_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cases = {
        '[trian]\nlr = 0.1\n': "mine.toml: unknown section(s) trian (valid: kind, [model], "
                               "[train], [sample])",
        '[sample]\nbeam = 4\n': "mine.toml [sample]: unknown option 'beam' (valid: batch_size, "
                                "beam_width, max_rounds, n, novel, novel_inputs, nsamples, "
                                "prototype_cut, raise_temperature, rare, rare_prototypes, resample, "
                                "strategy, temperature)",
        '[model]\nhiden = 4\nembd = 2\n': "mine.toml [model]: unknown options 'hiden', 'embd'",
        '[train]\nlr = "fast"\n': "mine.toml [train]: option 'lr' must be a number, not 'fast'",
        '[train]\nepochs = 2.5\n': "mine.toml [train]: option 'epochs' must be an integer, not 2.5",
        '[model]\nhidden = 1e9\n': "mine.toml [model]: option 'hidden' must be an integer",
        '[train]\nbatch_size = 0\n': "mine.toml [train]: batch_size must be >= 1 (got 0)",
        'kind = "seq2seq"\n[train]\nlength_buckets = 4\n':
            "mine.toml [train]: unknown option 'length_buckets' (valid: batch_size, batches_per_epoch, dev_fraction, "
            "drop_long_augmented, epochs, eval_batch_size, gamma, gradnorm, lr, lrdecay, monitor, packed_decoder, "
            "patience, restore_best)",
        'kind = "vae"\n': "preset kind 'vae' unknown (valid: recombine, seq2seq)",
    }
    for text, message in cases.items():
        with pytest.raises(UserError) as info:
            load_preset(write_preset(tmp_path, text))
        assert str(info.value).startswith(message), text
        assert "\n" not in str(info.value)


def test_a_geca_option_that_does_not_exist_is_refused_with_the_valid_ones():
    with pytest.raises(UserError) as info:
        make_config("scan", {"wug_sise": 2})
    valid = ", ".join(sorted(f.name for f in dataclasses.fields(GecaConfig)))
    assert str(info.value) == f"GECA preset scan: unknown option 'wug_sise' (valid: {valid})"
    assert load_geca_preset("lm")["wug_limit"] == 20


def test_sections_have_the_keys_the_code_reads():
    # the defaults the training loop used to spell out with .get
    assert GeneratorTrainConfig() == GeneratorTrainConfig(
        batch_size=32, lr=0.002, gradnorm=0.0, epochs=1, dev_fraction=0.1, patience=4,
        lrdecay=0.5, restore_best=None, seed=0, threads=None, log_every=50,
        checkpoint_seconds=120.0)
    assert read_section(SampleOptions, {"n": 3}, "x", skip=RUN_ONLY) == SampleOptions(n=3)
    # a preset that is already a dict (a checkpoint's own config) is checked the same way
    with pytest.raises(UserError, match=r"run\.pt \[train\]: unknown option 'lr_decay'"):
        check_preset({"kind": "recombine", "train": {"lr_decay": 0.5}}, "run.pt")


def test_train_generator_refuses_an_unknown_key_before_reading_data(tmp_path):
    config = {**load_preset("recombine_scan_cpu")}
    config["train"] = {**config["train"], "warmup": 100}
    with pytest.raises(UserError, match=r"\[train\]: unknown option 'warmup' \(valid: "):
        train_generator(config, "scan/does-not-exist", tmp_path / "g.pt", progress=False)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", ["generator", "predictor"])
def test_cli_bad_preset_key_is_one_error_line_and_exit_2(tmp_path, command):
    kind = "recombine" if command == "generator" else "seq2seq"
    path = write_preset(tmp_path, f'kind = "{kind}"\n[train]\nepochz = 3\n')
    out = tmp_path / "out.pt"
    proc = compgen("train", command, "--config", path, "--data", "scan/jump", "-o", str(out),
                   cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: mine.toml [train]: unknown option "
                                                   "'epochz' (valid: batch_size, ")
    assert not out.exists()


def test_sample_section_keys_are_the_ones_the_sampler_reads():
    # [sample] holds every sampling option except the per-run ones (precision and device
    # depend on the machine it runs on); the filter reads novel
    per_run = {"seed", "threads", "test_dropout", "precision", "device"}
    assert set(RUN_ONLY) == per_run
    with pytest.raises(UserError, match=r"unknown option 'seed'"):
        read_section(SampleOptions, {"seed": 1}, "x [sample]", skip=RUN_ONLY)
    assert read_section(SampleOptions, {"novel": False}, "x", skip=RUN_ONLY).novel is False


def test_the_shipped_presets_are_the_files_of_the_package():
    assert sorted(p.stem for p in CONFIG_DIR.glob("*.toml")) == preset_names()
