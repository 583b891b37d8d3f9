"""The stem-corrupt-LANG pipeline end to end on a toy language with a tiny model."""

import json

import pytest

from compgen.data.lemma_split import lemma_split_test
from compgen.models.inflection import InflectionConfig
from compgen.pipelines.stem_corrupt import StemCorruptRunOptions, run_language, write_report
from compgen.pipelines.stem_corrupt_report import markdown, paired_bootstrap

TINY = InflectionConfig(embed_dim=16, ffn_dim=32, heads=2, encoder_layers=1, decoder_layers=1,
                        dropout=0.0, attention_dropout=0.0)
LETTERS = "bcdfgklmnprstvz"


def _rows(start, count):
    rows = []
    for i in range(start, start + count):
        stem = LETTERS[i % 15] + "a" + LETTERS[(i // 15) % 15] + "o" + LETTERS[(i * 7) % 15]
        rows += [(stem, stem + "en", "V;PL"), (stem, "ge" + stem + "t", "V;PTCP")]
    return rows


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    root = tmp_path_factory.mktemp("data")
    folder = root / "sigmorphon2018"
    folder.mkdir()
    parts = {"train-low": _rows(0, 10), "dev": _rows(10, 4), "train-medium": _rows(0, 20),
             "train-high": _rows(0, 40), "test": _rows(40, 5)}
    for split, rows in parts.items():
        (folder / f"toy-{split}").write_text("".join(f"{a}\t{b}\t{t}\n" for a, b, t in rows))
    return root


def test_pipeline_runs_resumes_and_reports(toy_data, tmp_path, one_torch_thread):
    lines = []
    opts = StemCorruptRunOptions(root=tmp_path, strategies=("random", "umt+loss"), sizes=(4, 8),
                                 pool_size=40, updates=30, warmup=10, validate_every=10,
                                 uncertainty="reference", beam=2, model=TINY, data_dir=toy_data,
                                 log=lines.append)
    rows = run_language("toy", [0], opts)
    assert [(r["strategy"], r["size"]) for r in rows] == [
        ("none", 0), ("random", 4), ("umt+loss", 4), ("random", 8), ("umt+loss", 8)]
    test_size = len(lemma_split_test("toy", toy_data))
    assert test_size > 40
    assert all(r["rows"] == test_size == len(r["correct"]) for r in rows)
    folder = tmp_path / "stem-corrupt-toy"
    assert len((folder / "pool.tsv").read_text().splitlines()) == 40
    assert len((folder / "seed0" / "nll-reference.txt").read_text().splitlines()[1:]) == 40
    umt = [line.split("\t")[2] for line in (folder / "seed0" / "umt+loss-4.tsv").read_text().splitlines()]
    assert sorted(umt).count("V;PL") >= 1 and sorted(umt).count("V;PTCP") >= 1
    stamp = {p: p.stat().st_mtime_ns for p in folder.rglob("*.pt")}
    lines.clear()
    assert run_language("toy", [0], opts) == rows          # resumed: nothing retrained
    assert {p: p.stat().st_mtime_ns for p in folder.rglob("*.pt")} == stamp
    written = write_report(tmp_path)
    table = written["table"].read_text()
    assert "| toy | 4 |" in table and "UMT+LOSS - RANDOM" in table
    assert written["accuracy"].stat().st_size > 1000
    assert written["stem-corrupt-toy"].stat().st_size > 1000
    assert json.loads((folder / "seed0" / "random-4.json").read_text())["strategy"] == "random"


def test_paired_bootstrap_and_table():
    better = [[1, 1, 1, 0] * 25]
    worse = [[1, 0, 0, 0] * 25]
    d, p = paired_bootstrap(better, worse)
    assert d == pytest.approx(50.0) and p == 0.0
    d, p = paired_bootstrap(worse, better)
    assert d == pytest.approx(-50.0) and p == 1.0
    rows = [{"lang": "x", "size": 8, "strategy": s, "seed": k, "accuracy": acc, "correct": [1, 0]}
            for s, acc in (("random", 0.2), ("umt+loss", 0.4)) for k in (0, 1)]
    table = markdown(rows)
    assert "| x | 8 | 20.0 ± 0.0 (2) | 40.0 ± 0.0 (2) |" in table
    assert "Wins (best mean accuracy per language x size setting): umt+loss 1" in table


def test_table_of_one_strategy_and_one_seed_has_no_empty_comparison():
    rows = [{"lang": "x", "size": 0, "strategy": "none", "seed": 0, "accuracy": 0.1, "correct": [0, 1]},
            {"lang": "x", "size": 8, "strategy": "random", "seed": 0, "accuracy": 0.2, "correct": [1, 0]}]
    table = markdown(rows)
    assert "(1 seed)" in table and "(1 seeds)" not in table
    assert "UMT+LOSS - RANDOM" not in table      # random alone: nothing to compare
    both = rows + [{**rows[1], "strategy": "umt+loss", "accuracy": 0.5, "correct": [1, 1]}]
    (line,) = [line for line in markdown(both).splitlines() if line.startswith("* x:")]
    assert line.startswith("* x: +50.0 — 8: +50.0 (p=") and line.endswith(", 1 seed)")


def test_export_runs_like_the_eager_model(toy_data, tmp_path, one_torch_thread):
    from compgen.errors import UserError
    from compgen.export.kinds import export_checkpoint
    from compgen.pipelines.stem_corrupt import evaluate_model
    from compgen.runtimes.onnx_inflection import load_exported_inflection

    opts = StemCorruptRunOptions(root=tmp_path, strategies=("random",), sizes=(4,), pool_size=20,
                                 updates=40, warmup=10, validate_every=10, beam=5, model=TINY,
                                 data_dir=toy_data)
    run_language("toy", [0], opts)
    checkpoint = tmp_path / "stem-corrupt-toy" / "seed0" / "random-4.pt"
    folder = tmp_path / "export"
    manifest = export_checkpoint(checkpoint, folder, parity_sets=16, data_dir=toy_data, log=lambda m: None)
    onnx = manifest.parity["backends"]["onnx"]
    assert manifest.kind == "inflection" and manifest.parity["sources"] == 16
    assert load_exported_inflection(folder)[0] == manifest   # read back as it was written
    assert onnx["beam_identical"] and onnx["max_abs_logp_diff"] < 1e-4
    assert {"encoder.onnx", "decoder_step.onnx", "vocab.json", "target_vocab.json"} <= set(manifest.files)
    eager = evaluate_model(checkpoint, "toy", data_dir=toy_data)
    exported = evaluate_model(folder, "toy", data_dir=toy_data)
    assert exported["correct"] == eager["correct"]     # every test row decoded alike
    with open(folder / "decoder_step.onnx", "r+b") as f:
        f.seek(200)
        f.write(b"\x00" * 32)
    with pytest.raises(UserError, match="checksum"):
        evaluate_model(folder, "toy", data_dir=toy_data)


@pytest.mark.parametrize("args, message", [
    (["stem-corrupt-klingon"], "unknown SIGMORPHON language"),
    (["stem-corrupt-toy", "--sizes", "12,x"], "--sizes"),
    (["stem-corrupt-toy", "--strategies", "random,best"], "unknown selection strategy"),
    (["stem-corrupt-toy", "--uncertainty", "vibes"], "--uncertainty"),
])
def test_pipeline_command_rejects_bad_options(toy_data, tmp_path, args, message):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "compgen", "pipeline", *args, "--root", str(tmp_path),
                          "--data-dir", str(toy_data)], capture_output=True, text=True, check=False)
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 2 and len(lines) == 1 and message in lines[0], run.stderr
    assert list(tmp_path.iterdir()) == []


def test_pipeline_config_reaches_the_run(toy_data, tmp_path):
    """``compgen pipeline stem-corrupt-LANG --config FILE``: the file's pool, training, model
    and [run] values (none the bundled preset's) are what the run makes and records."""
    import subprocess
    import sys

    preset = tmp_path / "small.toml"
    preset.write_text('kind = "stem-corrupt"\n[corrupt]\npool_size = 24\n'
                      "[model]\nembed_dim = 16\nffn_dim = 32\nheads = 2\nencoder_layers = 1\n"
                      "decoder_layers = 1\n[train]\nupdates = 7\nwarmup = 3\nvalidate_every = 7\n"
                      '[run]\nstrategies = ["random"]\nsizes = [5]\nbeam = 1\n')
    root = tmp_path / "runs"
    run = subprocess.run([sys.executable, "-m", "compgen", "pipeline", "stem-corrupt-toy",
                          "--config", str(preset), "--root", str(root), "--data-dir", str(toy_data),
                          "--threads", "1"], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    folder = root / "stem-corrupt-toy"
    assert len((folder / "pool.tsv").read_text().splitlines()) == 24
    assert sorted(p.name for p in (folder / "seed0").glob("*.json")) == ["M.json", "random-5.json"]
    assert len((folder / "seed0" / "random-5.tsv").read_text().splitlines()) == 5
    assert {json.loads(p.read_text())["updates"] for p in (folder / "seed0").glob("*.json")} == {7}
    from compgen.training.inflection import load_inflection

    assert load_inflection(folder / "seed0" / "random-5.pt").config["model"]["embed_dim"] == 16


def test_pipeline_config_is_refused_where_it_does_not_apply(tmp_path):
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-m", "compgen", "pipeline", "jump-baseline", "--config",
                          "stem_corrupt", "--root", str(tmp_path)], capture_output=True, text=True,
                         check=False)
    lines = run.stderr.strip().splitlines()
    refusal = ("error: --config applies to the stem-corrupt-LANG pipelines, not jump-baseline "
               "(its presets: --generator-config, --predictor-config)")
    assert run.returncode == 2 and lines == [refusal], run.stderr
    assert list(tmp_path.iterdir()) == []
