"""Export of the conditional predictor: every backend against the eager model, clear
errors for broken artifacts and failed validations."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from compgen.data import load_dataset
from compgen.data.vocab import BOS_ID, Vocab
from compgen.errors import UserError
from compgen.export.kinds import export_checkpoint
from compgen.export.predictor import steps_read
from compgen.models.seq2seq import (
    Seq2Seq,
    Seq2SeqConfig,
    collate,
    cut_prediction,
    greedy_search,
    run_greedy,
)
from compgen.runtimes.artifact import LOGP_FLOOR, TOLERANCE, load_manifest
from compgen.runtimes.onnx_predictor import OnnxPredictor
from compgen.runtimes.predictor import predict_exported
from compgen.runtimes.torchscript_predictor import TorchScriptPredictor
from compgen.training.predictor import conditional_pairs, load_predictor, save_predictor

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def train_tiny_predictor(path, data_dir, copy=False, steps=40):
    """A small Seq2Seq trained for ``steps`` batches on the data folder's SCAN jump: sharp
    enough distributions that greedy ties are no accident."""
    table = load_dataset("scan/jump", data_dir)
    vocab = Vocab.build([t for x, y in conditional_pairs(table) for t in (x, y)])
    pairs = conditional_pairs(table.filter(table["split"] == "train"))
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(vocab_size=len(vocab), hidden=32, embed=16, pdrop=0.1,
                                  copy=copy, max_len=45))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    model.train()
    for step in range(steps):
        batch = [pairs[(step * 16 + i) % len(pairs)] for i in range(16)]
        loss = model.loss(collate([vocab.encode(x) for x, _ in batch], 45),
                          collate([vocab.encode(y) for _, y in batch], 45))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    save_predictor(path, model.eval(), vocab, {"data": "scan/jump", "seed": 0})
    return path


@pytest.fixture(scope="module")
def exported(tmp_path_factory, small_scan):
    work = tmp_path_factory.mktemp("predictor")
    ckpt = train_tiny_predictor(work / "pred.pt", small_scan)
    manifest = export_checkpoint(ckpt, work / "out", data_dir=small_scan, log=lambda m: None)
    return ckpt, work / "out", manifest


@pytest.fixture(scope="module")
def test_sources(small_scan):
    table = load_dataset("scan/jump", small_scan)
    return table.filter(table["split"] == "test")["x"].to_list()


def test_predictor_export_writes_a_validated_artifact(exported):
    _, folder, manifest = exported
    names = {p.name for p in folder.iterdir()}
    assert names == {"manifest.json", "model.ts", "encoder.onnx", "decoder_step.onnx",
                     "vocab.json", "vocab.txt", "predictor.pt", "README.md"}   # README: the card
    assert manifest.kind == "seq2seq" and load_manifest(folder) == manifest   # read back
    assert manifest.config["run"]["data"] == "scan/jump"
    parity = manifest.parity
    assert parity["split"] == "test" and 40 <= parity["sources"] <= 50
    for name in ("torchscript", "onnx"):
        f = parity["backends"][name]
        assert f["greedy_identical"] is True and f["beam_identical"] is True
        assert f["max_abs_logp_diff"] <= TOLERANCE
    step = {i["name"]: i["shape"] for i in manifest.graphs["decoder_step.onnx"]["inputs"]}
    assert list(step) == ["token", "h", "c", "feed", "keys", "context", "mask"]  # no copy
    assert step["keys"][:2] == ["batch", "source_len"]
    encoder = manifest.graphs["encoder.onnx"]
    assert encoder["inputs"][0]["shape"] == ["batch", "source_len"]
    decoding = manifest.decoding
    assert decoding["first_step_masked"] == [0, 1, 2, 3, 4, 5]
    assert decoding["later_steps_masked"] == [0, 1, 3, 5]


def test_backends_agree_with_the_eager_model(exported, test_sources):
    """Greedy identical across eager / TorchScript / ONNX Runtime on the same batch, and
    teacher-forced per-step log-probs within the export tolerance."""
    ckpt, folder, manifest = exported
    model, vocab, _ = load_predictor(ckpt)
    source = collate([vocab.encode(x) for x in test_sources], 45)
    eager = greedy_search(model, source)
    onnx = OnnxPredictor(folder, manifest)
    scripted = torch.jit.load(str(folder / "model.ts"))
    cut = [cut_prediction(r) for r in eager.tolist()]
    scripted_greedy = run_greedy(TorchScriptPredictor(scripted), onnx.rules, source, 45)
    assert [cut_prediction(r) for r in scripted_greedy[0].tolist()] == cut
    assert [cut_prediction(r) for r in onnx.greedy(source.numpy(), 45)[0].tolist()] == cut

    # teacher-forced per-step log-probs of the greedy rows, on the steps up to each
    # row's </s> (the steps predictions are made of)
    target = torch.cat([torch.full((source.size(0), 1), BOS_ID), eager], 1)
    read = steps_read(eager)
    assert read.sum() > 100
    memory, state = model.encode(source)
    steps = []
    with torch.no_grad():
        for t in range(target.size(1) - 1):
            logp, state, _ = model.decode_step(target[:, t], state, memory)
            steps.append(logp)
    reference = torch.stack(steps, 1).numpy()[read]
    for got in (scripted.score(source, target).detach().numpy(),
                onnx.score(source.numpy(), target.numpy())):
        keep = reference > LOGP_FLOOR
        assert np.abs(got[read] - reference)[keep].max() <= TOLERANCE


def test_steps_read_end_at_the_first_eos():
    ids = torch.tensor([[7, 2, 9, 2], [7, 8, 9, 10], [2, 2, 2, 2]])
    assert steps_read(ids).tolist() == [[True, True, False, False], [True] * 4,
                                        [True, False, False, False]]


def test_predict_exported_is_the_same_on_every_backend(exported, test_sources):
    ckpt, folder, _ = exported
    model, vocab, _ = load_predictor(ckpt)
    source = collate([vocab.encode(x) for x in test_sources], 45)
    eager = [[vocab.tokens[t] for t in cut_prediction(r)] for r in greedy_search(model, source).tolist()]
    for backend in ("onnx", "torchscript", "torch"):
        # other batchings than the eager one's: the encoder does not see the padding
        assert predict_exported(folder, test_sources, backend=backend, batch_size=7) == eager
    beams = [predict_exported(folder, test_sources[:12], backend=b, beam_width=3, batch_size=5)
             for b in ("onnx", "torchscript", "torch")]
    assert beams[0] == beams[1] == beams[2]
    with pytest.raises(UserError, match="valid: onnx, torchscript, torch"):
        predict_exported(folder, test_sources, backend="cpp")


def test_copying_predictor_exports(tmp_path, small_scan):
    ckpt = train_tiny_predictor(tmp_path / "copy.pt", small_scan, copy=True, steps=10)
    manifest = export_checkpoint(ckpt, tmp_path / "out", parity_sets=16, data_dir=small_scan,
                                 log=lambda m: None)
    assert manifest.parity["sources"] == 16
    for f in manifest.parity["backends"].values():
        assert f["greedy_identical"] and f["beam_identical"] and f["max_abs_logp_diff"] <= TOLERANCE
    step = [i["name"] for i in manifest.graphs["decoder_step.onnx"]["inputs"]]
    assert step[-1] == "source_onehot"


def test_corrupted_encoder_gives_a_clear_error(exported, tmp_path, test_sources, damaged_copy):
    _, folder, _ = exported
    broken = damaged_copy(folder, "encoder.onnx")
    with pytest.raises(UserError, match="encoder.onnx: checksum does not match"):
        predict_exported(broken, test_sources[:3])

    # a consistent manifest around an unreadable graph: ONNX Runtime's refusal, one line
    garbage = damaged_copy(folder, "encoder.onnx", b"not an onnx file")
    with pytest.raises(UserError, match="encoder.onnx: cannot load ONNX graph"):
        predict_exported(garbage, test_sources[:3])


def test_failed_validation_leaves_no_artifact(exported, tmp_path, small_scan, monkeypatch):
    """An ONNX graph that does not compute what the model computes is refused."""
    import copy

    import compgen.export.predictor as predictor_export

    ckpt = exported[0]
    real_export = predictor_export.export_predictor_onnx

    def export_a_different_model(model, folder):
        other = copy.deepcopy(model)
        with torch.no_grad():
            other.output.bias.add_(torch.randn_like(other.output.bias))
        return real_export(other, folder)

    monkeypatch.setattr(predictor_export, "export_predictor_onnx", export_a_different_model)
    with pytest.raises(UserError, match="failed validation: onnx: greedy outputs differ"):
        export_checkpoint(ckpt, tmp_path / "out", parity_sets=16, data_dir=small_scan,
                          log=lambda m: None)
    assert list(tmp_path.iterdir()) == []  # no artifact, no staging folder left behind


def test_predictor_exports_do_not_sample(exported):
    from compgen.sampling.run import sample_export

    with pytest.raises(UserError, match="only generator exports sample"):
        sample_export(exported[1], n=5)


def test_export_cli_on_a_predictor(exported, small_scan, tmp_path):
    ckpt = exported[0]
    result = subprocess.run(
        [sys.executable, "-m", "compgen", "export", str(ckpt), "-o", str(tmp_path / "cli"),
         "--parity-sets", "8", "--data-dir", str(small_scan)],
        capture_output=True, text=True, check=False, env={**os.environ}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "parity on 8 test sources" in result.stdout
    assert load_manifest(tmp_path / "cli").kind == "seq2seq"
