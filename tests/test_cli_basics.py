"""What a user expects of the command line: --version, presets, inspect, readable help
(flags as flags, full option names at 80 columns, a help line for every option), data
listing and statistics that say what is there, --seed wherever there is randomness, and
no torch warnings on the terminal."""

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch
import typer

from compgen import __version__
from compgen.checkpoint import CONFIG_DIR
from compgen.cli import app

ROOT = Path(__file__).resolve().parents[1]


def compgen(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "compgen", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, check=False)


def commands(group=None, path=()):
    """(path, command) for every leaf command of the CLI."""
    group = group or typer.main.get_command(app)
    for name, sub in group.commands.items():
        if hasattr(sub, "commands"):
            yield from commands(sub, (*path, name))
        else:
            yield (*path, name), sub


def options(command):
    return [p for p in command.params if getattr(p, "param_type_name", "") == "option"]


def test_version():
    proc = compgen("--version")
    assert proc.returncode == 0 and proc.stdout.strip() == f"compgen {__version__}"


def test_presets_list_and_show():
    proc = compgen("presets")
    assert proc.returncode == 0, proc.stderr
    listed = {line.split()[0] for line in proc.stdout.splitlines() if line.strip()}
    assert listed == {p.stem for p in CONFIG_DIR.glob("*.toml")} | {"csl_scan", "csl_cogs", "csl_generic"}
    assert all(line.rstrip().endswith((".", ")")) for line in proc.stdout.splitlines() if line.strip())
    assert "max_num_nts = 3" in compgen("presets", "csl_generic").stdout
    shown = compgen("presets", "recombine_sig_cpu")
    assert tomllib.loads(shown.stdout)["kind"] == "recombine"
    bad = compgen("presets", "no_such_preset")
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown preset 'no_such_preset'")


def test_every_option_has_a_help_line():
    missing = [f"{' '.join(path)} {o.opts[0]}" for path, command in commands()
               for o in options(command) if not (o.help or "").strip()]
    assert missing == []


def test_help_at_80_columns_shows_full_names_and_flags_as_flags():
    from typer.testing import CliRunner

    runner = CliRunner()
    for path, command in commands():
        result = runner.invoke(app, [*path, "--help"], terminal_width=80)
        assert result.exit_code == 0, (path, result.output)
        text = result.output
        assert "…" not in text and "<bool>" not in text, (path, text)
        assert max(len(line) for line in text.splitlines()) <= 80, path
        for option in options(command):
            for name in option.opts + option.secondary_opts:
                assert name in text, (path, name)


def test_commands_with_randomness_take_seed():
    by_name = {" ".join(path): command for path, command in commands()}
    for name in ("train generator", "train predictor", "sample", "augment geca", "pipeline",
                 "export", "evaluate"):
        assert any("--seed" in o.opts for o in options(by_name[name])), name


def test_data_list_names_every_sigmorphon_language_present(data_dir, require_data):
    folder = require_data(data_dir / "sigmorphon2018")
    present = {p.name.split("-train-")[0] for p in folder.glob("*-train-*")} if folder.is_dir() else set()
    if len(present) <= 3:
        pytest.skip("the data folder has no SIGMORPHON languages beyond the paper's")
    listed = set(compgen("data", "list", "--data-dir", str(data_dir)).stdout.split())
    assert {f"sigmorphon/{lang}" for lang in present} <= listed


def test_data_stats_of_a_corpus_has_no_input_vocabulary(data_dir):
    from compgen.data import load_dataset
    from compgen.data.stats import table_stats

    if not (data_dir / "lm" / "kin").is_dir():
        pytest.skip("lm/kin is not in the data folder")
    stats = table_stats(load_dataset("lm/kin", data_dir))
    assert "x_vocab" not in stats.columns and stats["y_vocab"].min() > 0
    scan = table_stats(load_dataset("scan/jump", data_dir))
    assert scan["x_vocab"].min() > 0


@pytest.fixture(scope="module")
def tiny_generator(tmp_path_factory):
    from compgen.checkpoint import save_checkpoint
    from compgen.data.vocab import Vocab
    from compgen.models.recombine import Recombine, RecombineConfig

    torch.manual_seed(0)
    vocab = Vocab.build([["walk", "jump", "I_WALK", "I_JUMP"]])
    config = {"kind": "recombine", "data": "scan/jump",
              "model": {"variant": "scan", "nproto": 2, "hidden": 16, "embed": 8, "attdim": 8,
                        "zdim": 2, "kpos": 4}}
    model = Recombine(RecombineConfig(variant="scan", vocab_size=len(vocab), nproto=2, hidden=16,
                                      embed=8, attdim=8, zdim=2, kpos=4))
    path = tmp_path_factory.mktemp("inspect") / "g.pt"
    save_checkpoint(path, model, config, vocab, "recombine",
                    train_state={"step": 7, "epoch": 0, "done": False, "curve": []})
    return path, model


def test_inspect_a_checkpoint(tiny_generator):
    path, model = tiny_generator
    proc = compgen("inspect", str(path))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "kind: recombine" in out and "data: scan/jump" in out and "size: 10" in out
    assert f"parameters: {sum(p.numel() for p in model.parameters())}" in out
    assert "[training state]" in out and "step: 7" in out


def test_predictor_export_is_quiet_and_inspectable(tmp_path, small_scan):
    from test_export_predictor import train_tiny_predictor

    ckpt = train_tiny_predictor(tmp_path / "pred.pt", small_scan)
    proc = compgen("export", str(ckpt), "-o", str(tmp_path / "pred"), "--parity-sets", "8",
                   "--data-dir", str(small_scan))
    assert proc.returncode == 0, proc.stderr
    assert "warning" not in proc.stderr.lower(), proc.stderr
    shown = compgen("inspect", str(tmp_path / "pred"))
    assert shown.returncode == 0, shown.stderr
    assert "type: export folder" in shown.stdout and "kind: seq2seq" in shown.stdout
    assert "greedy_identical" in shown.stdout and "[files]" in shown.stdout
