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
from compgen.cli import app
from compgen.cli.commands import every_command
from compgen.training.checkpoint import CONFIG_DIR

ROOT = Path(__file__).resolve().parents[1]


def compgen(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "compgen", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, check=False)


def commands(group=None, path=()):
    """(path, command) for every leaf command of the CLI."""
    group = group or typer.main.get_command(app)
    for name, sub in every_command(group).items():
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
    about = {line.split()[0]: line for line in proc.stdout.splitlines() if line.strip()}
    assert "novel examples kept per template" in about["geca_generic"]
    assert "novel_variants = true" in compgen("presets", "geca_generic").stdout
    assert not any("novel_variants" in compgen("presets", name).stdout
                   for name in ("geca_scan", "geca_lm", "geca_lm_na", "geca_semparse",
                                "geca_semparse_logic"))
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
    from compgen.data.vocab import Vocab
    from compgen.models.recombine import Recombine, RecombineConfig
    from compgen.training.checkpoint import save_checkpoint

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


def test_listing_presets_imports_no_torch():
    code = ("import sys\nfrom compgen.cli import main\nsys.argv = ['compgen', 'presets']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert proc.stderr.strip().splitlines()[-1] == "no torch", proc.stderr
    assert "recombine_scan_cpu" in proc.stdout


def test_bare_ray_means_a_local_cluster_and_takes_no_flag_as_its_value():
    from compgen.cli.common import fill_optional_values, ray_address

    assert fill_optional_values(["pipeline", "x", "--seeds", "0-4", "--ray"]) == [
        "pipeline", "x", "--seeds", "0-4", "--ray", "local"]
    assert fill_optional_values(["--ray", "--seeds", "0"]) == ["--ray", "local", "--seeds", "0"]
    assert fill_optional_values(["--ray", "10.0.0.1:6379"]) == ["--ray", "10.0.0.1:6379"]
    assert fill_optional_values(["--", "--ray"]) == ["--", "--ray"]
    assert ray_address("local") is None and ray_address("ray://head:10001") == "ray://head:10001"
    # every case stops with one error line before Ray starts
    for args, message in (
            (["pipeline", "no-such-run", "--seeds", "0", "--ray"],
             "error: pipeline no-such-run: unknown run"),
            (["pipeline", "jump-recomb2", "--ray", "--seeds", "0-x"], "error: --seeds '0-x'"),
            (["pipeline", "jump-recomb2", "--ray", "not an address"], "error: --ray not an address"),
            (["sample", "exported/scan-jump-recomb2", "--ray", "--ray-workers", "0"],
             "error: --ray-workers must be >= 1")):
        proc = compgen(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith(message) and len(proc.stderr.splitlines()) == 1, proc.stderr


def test_pipeline_list_names_data_sets_as_data_list_does():
    proc = compgen("pipeline", "--list")
    assert proc.returncode == 0, proc.stderr
    assert "sigmorphon2018" not in proc.stdout
    (line,) = [line for line in proc.stdout.splitlines() if line.startswith("stem-corrupt-")]
    assert line.split()[0] == "stem-corrupt-<lang>" and line.split()[-1] == "sigmorphon/<lang>"
    assert {line.split()[-1].split("/")[0] for line in proc.stdout.splitlines()} == {
        "scan", "sigmorphon", "geoquery"}


def test_inspect_prints_non_ascii_text_as_itself():
    import json

    from compgen.evaluation.inspection import sections_text

    sections = {"vocabulary": {"size": 3, "tokens": "ბ ა ლ"},
                "config": {"data": "sigmorphon/georgian", "target": ["ბ", "ა"]}}
    text = sections_text(sections)
    assert "tokens: ბ ა ლ" in text and 'target: ["ბ", "ა"]' in text and "\\u" not in text
    assert json.loads(sections_text(sections, as_json=True)) == sections
    assert "\\u" not in sections_text(sections, as_json=True)


def test_sample_without_output_prints_the_samples_tsv(tmp_path):
    """stdout is the same bytes as the -o file (its header included); the summary goes to
    stderr, so `compgen sample ... > file` writes a samples TSV."""
    args = ["sample", "exported/scan-jump-recomb2", "--n", "3", "--nsamples", "3",
            "--batch-size", "32", "--max-rounds", "2", "--threads", "1", "--data-dir", str(tmp_path)]
    out = tmp_path / "samples.tsv"
    written = compgen(*args, "-o", str(out))
    printed = compgen(*args)
    assert written.returncode == printed.returncode == 0, printed.stderr
    assert printed.stdout == out.read_text(encoding="utf-8")
    assert printed.stdout.startswith("#x\ty\tlogprob\n") and len(printed.stdout.splitlines()) == 4
    assert "3 samples in" in printed.stderr and "3 samples in" in written.stdout
