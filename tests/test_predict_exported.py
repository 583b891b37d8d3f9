"""Exported predictors have consumers: `compgen evaluate EXPORT` scores an export folder
with ONNX Runtime, and `compgen predict EXPORT --input FILE` predicts new inputs."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_export_predictor import train_tiny_predictor

from compgen.data import load_dataset
from compgen.evaluation.evaluate import evaluate_predictor
from compgen.export.kinds import export_checkpoint
from compgen.models.metrics import predict
from compgen.training.predictor import load_predictor

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, small_scan):
    work = tmp_path_factory.mktemp("predict")
    ckpt = train_tiny_predictor(work / "pred.pt", small_scan)
    export_checkpoint(ckpt, work / "pred", data_dir=small_scan, log=lambda m: None)
    return ckpt, work / "pred"


def compgen(*args):
    return subprocess.run([sys.executable, "-m", "compgen", *args], capture_output=True, text=True,
                          cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"})


def test_evaluate_an_export_folder_with_onnx(exported, small_scan):
    ckpt, folder = exported
    from compgen.runtimes.card import render_card

    assert (folder / "README.md").read_text(encoding="utf-8") == render_card(folder)  # its card
    eager = evaluate_predictor(ckpt, data_dir=small_scan)
    onnx = evaluate_predictor(folder, data_dir=small_scan, backend="onnx")
    strip = lambda rows: [{k: v for k, v in r.items() if k != "model"} for r in rows]
    assert strip(onnx) == strip(eager) and onnx[0]["n"] == 50
    proc = compgen("evaluate", str(folder), "--data-dir", str(small_scan))
    assert proc.returncode == 0, proc.stderr
    assert f"{onnx[0]['exact_match']:.4f}"[:4] in proc.stdout


def test_predict_new_inputs_from_a_file(exported, small_scan, tmp_path):
    ckpt, folder = exported
    table = load_dataset("scan/jump", small_scan)
    sources = table.filter(table["split"] == "test")["x"].to_list()[:7]
    inputs = tmp_path / "inputs.txt"
    inputs.write_text("\n".join(" ".join(s) for s in sources) + "\n", encoding="utf-8")
    out = tmp_path / "predictions.tsv"
    proc = compgen("predict", str(folder), "--input", str(inputs), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    model, vocab, _ = load_predictor(ckpt)
    expected = [f"{' '.join(s)}\t{' '.join(p)}" for s, p in zip(sources, predict(model, vocab, sources))]
    assert out.read_text(encoding="utf-8").splitlines() == expected
    proc = compgen("predict", str(folder), "--input", str(tmp_path / "missing.txt"))
    assert proc.returncode == 2 and proc.stderr.startswith("error: --input")


def test_predict_skips_the_header_of_a_samples_file(exported, small_scan, tmp_path):
    """The README's recipe feeds a samples TSV (or its first column, cut) to predict: its
    `#x<TAB>y<TAB>logprob` header is not an input."""
    from compgen.io import read_inputs, write_samples_tsv

    _, folder = exported
    table = load_dataset("scan/jump", small_scan)
    test = table.filter(table["split"] == "test")
    pairs = list(zip(test["x"].to_list()[:5], test["y"].to_list()[:5], strict=True))
    samples = tmp_path / "samples.tsv"
    write_samples_tsv(samples, pairs, {"logprob": [-1.0] * 5})
    assert samples.read_text(encoding="utf-8").startswith("#x\ty\tlogprob\n")
    cut = tmp_path / "inputs.txt"     # cut -f1 samples.tsv > inputs.txt
    cut.write_text("".join(line.split("\t")[0] + "\n"
                           for line in samples.read_text(encoding="utf-8").splitlines()))
    assert read_inputs(samples) == read_inputs(cut) == [x for x, _ in pairs]
    for path in (samples, cut):
        out = tmp_path / f"{path.stem}.predictions.tsv"
        proc = compgen("predict", str(folder), "--input", str(path), "-o", str(out))
        assert proc.returncode == 0, proc.stderr
        lines = out.read_text(encoding="utf-8").splitlines()
        assert [line.split("\t")[0] for line in lines] == [" ".join(x) for x, _ in pairs]
        assert "5 predictions" in proc.stdout
