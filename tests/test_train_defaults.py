"""Training defaults follow the data set, the predictor reports progress inside an epoch,
and --resume continues the checkpoint's own run: data and config come from the
checkpoint; a different one is an error naming the field."""

import os
import subprocess
import sys
from pathlib import Path

from compgen.training.checkpoint import default_preset, load_checkpoint

ROOT = Path(__file__).resolve().parents[1]

TINY_PREDICTOR = """kind = "seq2seq"
[model]
hidden = 16
embed = 8
pdrop = 0.0
[train]
batch_size = 16
lr = 0.01
epochs = 1
patience = 0
"""


def compgen(*args, data_dir):
    return subprocess.run([sys.executable, "-m", "compgen", *args, "--data-dir", str(data_dir)],
                          capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})


def one_error_line(proc) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.strip()]
    assert line.startswith("error: ")
    return line


def test_default_presets_follow_the_data_set():
    assert default_preset("generator", "sigmorphon/turkish/hints-8.0") == "recombine_sig_cpu"
    assert default_preset("generator", "scan/jump") == "recombine_scan_cpu"
    assert default_preset("predictor", "sigmorphon/spanish/hints-4.0") == "seq2seq_sig_cpu"
    assert default_preset("predictor", "scan/around_right") == "seq2seq_scan_cpu"


def test_sigmorphon_generator_without_config_then_resume_without_data(tmp_path, data_dir,
                                                                     require_data):
    require_data(data_dir / "sigmorphon2018")
    out = tmp_path / "sig.pt"
    proc = compgen("train", "generator", "--data", "sigmorphon/turkish/hints-8.0", "--max-steps", "1",
                   "--quiet", "--threads", "1", "-o", str(out), data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr
    assert load_checkpoint(out).config["model"]["variant"] == "sig"
    # the checkpoint knows its data and config
    proc = compgen("train", "generator", "--resume", "--max-steps", "2", "--quiet", "--threads", "1",
                   "-o", str(out), data_dir=data_dir)
    assert proc.returncode == 0, proc.stderr
    assert load_checkpoint(out).train_state["step"] == 2
    line = one_error_line(compgen("train", "generator", "--resume", "--data", "scan/jump",
                                  "--hidden", "24", "-o", str(out), data_dir=data_dir))
    assert "--data sigmorphon/turkish/hints-8.0 -> scan/jump" in line and "model.hidden" in line


def test_predictor_resume_names_the_changed_field(tmp_path, small_scan):
    (tmp_path / "tiny.toml").write_text(TINY_PREDICTOR)
    (tmp_path / "wider.toml").write_text(TINY_PREDICTOR.replace("hidden = 16", "hidden = 20"))
    out = tmp_path / "p.pt"
    proc = compgen("train", "predictor", "--data", "scan/jump", "--config", str(tmp_path / "tiny.toml"),
                   "--threads", "1", "-o", str(out), data_dir=small_scan)
    assert proc.returncode == 0, proc.stderr
    # progress inside the epoch (~30 batches): a line every tenth of it
    assert sum(line.startswith("epoch 1/1  batch ") for line in proc.stdout.splitlines()) >= 5
    line = one_error_line(compgen("train", "predictor", "--resume", "--config",
                                  str(tmp_path / "wider.toml"), "-o", str(out), data_dir=small_scan))
    assert "model.hidden 16 -> 20" in line and "--data" not in line
    line = one_error_line(compgen("train", "predictor", "--resume", "--data", "scan/length",
                                  "-o", str(out), data_dir=small_scan))
    assert "--data scan/jump -> scan/length" in line
