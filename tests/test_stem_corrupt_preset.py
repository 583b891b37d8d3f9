"""The STEM-CORRUPT preset is a TOML file (compgen/configs/stem_corrupt.toml) that every
default of the corruption, the aligner, the inflection model, its training and the
pipeline run is read from, strictly: one error naming the file and the key otherwise."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compgen.augment.stem_corrupt import AlignerConfig, StemCorruptConfig
from compgen.configs.defaults import defaults_from
from compgen.errors import UserError
from compgen.evaluation.inspection import PRESET_DIR, preset_table
from compgen.models.inflection import InflectionConfig
from compgen.pipelines.stem_corrupt import StemCorruptRunOptions
from compgen.training.inflection import InflectionTrainConfig
from compgen.training.stem_corrupt_preset import (
    corrupt_config,
    read_stem_corrupt_preset,
    stem_corrupt_preset,
)


def test_the_defaults_are_the_reference_settings():
    # the values the code used before they moved into the preset (spec of Samir & Silfverberg)
    assert StemCorruptConfig() == StemCorruptConfig(
        pool_size=10_000, theta=0.5, min_run=3, protect_over=5, seed=0,
        aligner=AlignerConfig(iterations=10, burnin=5, lag=1, prior=0.1, compat=False))
    assert InflectionTrainConfig() == InflectionTrainConfig(
        updates=6000, batch_size=16, lr=1e-3, warmup=4000, warmup_init_lr=1e-7,
        label_smoothing=0.2, validate_every=0, seed=0,
        model=InflectionConfig(embed_dim=256, ffn_dim=512, heads=4, encoder_layers=4,
                               decoder_layers=4, dropout=0.3, attention_dropout=0.1,
                               activation_dropout=0.0, max_positions=256))
    run = StemCorruptRunOptions()
    assert (list(run.strategies), list(run.sizes), run.uncertainty, run.beam) == (
        ["random", "umt+loss"], [128, 256, 512, 1024, 2048], "hypothesis", 5)
    assert (run.pool_size, run.pool_seed, run.updates, run.warmup, run.validate_every) == (
        10_000, 0, 6000, 4000, 0)
    assert run.model == InflectionConfig()
    assert isinstance(InflectionConfig().activation_dropout, float)   # 0.0 stays a float
    run.sizes.append(1)
    assert StemCorruptRunOptions().sizes == [128, 256, 512, 1024, 2048]   # not shared


def test_the_loader_gives_the_dataclass_defaults_and_reads_a_file_over_them(tmp_path):
    bundled = stem_corrupt_preset()
    assert bundled.corrupt == StemCorruptConfig() and bundled.train == InflectionTrainConfig()
    assert bundled.run.strategies == StemCorruptRunOptions().strategies
    mine = tmp_path / "mine.toml"
    mine.write_text('kind = "stem-corrupt"\n[aligner]\niterations = 3\n[model]\nheads = 2\n'
                    '[run]\nsizes = [4, 8]\n')
    preset = stem_corrupt_preset(mine)
    assert preset.corrupt.aligner == AlignerConfig(iterations=3)
    assert preset.train.model == InflectionConfig(heads=2)
    assert preset.train.updates == 6000 and preset.run.sizes == [4, 8]
    assert corrupt_config(preset, pool_size=7, compat=True) == StemCorruptConfig(
        pool_size=7, aligner=AlignerConfig(iterations=3, compat=True))


def test_the_preset_is_listed_with_what_it_is_for():
    rows = {row["name"]: row for row in preset_table()}
    assert (PRESET_DIR / "stem_corrupt.toml").is_file()
    assert rows["stem_corrupt"]["kind"] == "stem-corrupt"
    assert rows["stem_corrupt"]["about"].startswith("STEM-CORRUPT ")


@pytest.mark.parametrize("text, message", [
    ('kind = "stem-corrupt"\n[corrupt]\nthetta = 0.4\n',
     r"mine\.toml \[corrupt\]: unknown option 'thetta' \(valid: min_run, pool_size, protect_over, seed, theta\)"),
    ('kind = "stem-corrupt"\n[corrupt]\naligner = 1\n', r"mine\.toml \[corrupt\]: unknown option 'aligner'"),
    ('kind = "stem-corrupt"\n[train]\nupdates = 1.5\n', r"mine\.toml \[train\]: option 'updates' must be an integer"),
    ('kind = "stem-corrupt"\n[run]\nsizes = [4, "8"]\n', r"mine\.toml \[run\]: option 'sizes' must be an integer"),
    ('kind = "stem-corrupt"\n[run]\nsizes = 4\n', r"mine\.toml \[run\]: option 'sizes' must be a list of integers"),
    ('kind = "stem-corrupt"\n[sampler]\nseed = 1\n', r"mine\.toml: unknown key 'sampler'"),
    ('[corrupt]\nseed = 1\n', r"mine\.toml: kind must be \"stem-corrupt\""),
])
def test_a_wrong_key_or_value_is_one_error_naming_the_file_and_key(tmp_path, text, message):
    (tmp_path / "mine.toml").write_text(text)
    with pytest.raises(UserError, match=message):
        stem_corrupt_preset(tmp_path / "mine.toml")


def test_the_bundled_preset_is_also_named_by_its_name(tmp_path, monkeypatch):
    assert stem_corrupt_preset("stem_corrupt") == stem_corrupt_preset()
    (tmp_path / "stem_corrupt").write_text('kind = "stem-corrupt"\n[run]\nbeam = 3\n')
    monkeypatch.chdir(tmp_path)   # a file of that name is read instead
    assert stem_corrupt_preset("stem_corrupt").run.beam == 3


def test_a_missing_or_broken_file_is_one_error(tmp_path):
    with pytest.raises(UserError, match=r"nothere\.toml: no such preset file"):
        stem_corrupt_preset(tmp_path / "nothere.toml")
    (tmp_path / "bad.toml").write_text("[corrupt\n")
    with pytest.raises(UserError, match=r"bad\.toml: not valid TOML"):
        stem_corrupt_preset(tmp_path / "bad.toml")
    with pytest.raises(UserError, match=r"x\.toml: unknown key 'extra'"):
        read_stem_corrupt_preset({"kind": "stem-corrupt", "extra": 1}, "x.toml")


def test_the_bundled_defaults_are_checked_when_a_class_reads_them():
    # a class with a field the preset section does not set, or without one it sets
    with pytest.raises(UserError, match=r"stem_corrupt\.toml \[aligner\]: no value for 'beta'"):
        @defaults_from("stem_corrupt.toml", "aligner")
        class TooMany:
            iterations: int
            burnin: int
            lag: int
            prior: float
            compat: bool
            beta: float
    with pytest.raises(UserError, match=r"stem_corrupt\.toml \[aligner\]: unknown option 'compat'"):
        @defaults_from("stem_corrupt.toml", "aligner")
        class TooFew:
            iterations: int
            burnin: int
            lag: int
            prior: float
    with pytest.raises(UserError, match=r"stem_corrupt\.toml \[aligner\]: option 'prior' must be an integer"):
        @defaults_from("stem_corrupt.toml", "aligner")
        class WrongType:
            iterations: int
            burnin: int
            lag: int
            prior: int
            compat: bool


def test_the_commands_refuse_a_wrong_preset_file_before_any_work(tmp_path):
    (tmp_path / "mine.toml").write_text('kind = "stem-corrupt"\n[aligner]\nsweeps = 3\n')
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for command in (["augment", "stem-corrupt", "nosuchlang", "-o", "pool.tsv"],
                    ["train", "inflection", "nosuchlang", "-o", "m.pt"]):
        proc = subprocess.run([sys.executable, "-m", "compgen", *command, "--config", "mine.toml"],
                              capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
                              check=False)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: mine.toml [aligner]: unknown option 'sweeps'")
    assert not list(tmp_path.glob("pool*")) and not list(tmp_path.glob("m.*"))
