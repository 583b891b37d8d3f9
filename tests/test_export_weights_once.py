"""An export folder stores each fp32 weight copy only where a runtime needs it: the eager
model (`--backend torch`) is rebuilt from model.ts, and the prototype list can be capped."""

import pytest
import torch

from compgen.data import load_dataset
from compgen.data.vocab import Vocab
from compgen.errors import UserError
from compgen.export.kinds import export_checkpoint
from compgen.runtimes.artifact import load_manifest, read_prototypes
from compgen.sampling.run import eager_model, sample_export
from compgen.training.checkpoint import (
    build_recombine,
    load_generator,
    load_preset,
    save_checkpoint,
)


def make_checkpoint(path, data_dir):
    """A tiny untrained recomb-2 generator (weights random but fixed)."""
    config = load_preset("recombine_scan_cpu")
    config["data"] = "scan/jump"
    config["model"].update(nproto=2, hidden=32, embed=16, attdim=16)
    vocab = Vocab.from_table(load_dataset("scan/jump", data_dir))
    torch.manual_seed(0)
    save_checkpoint(path, build_recombine(config, len(vocab)), config, vocab, "recombine")
    return path


@pytest.fixture(scope="module")
def capped(tmp_path_factory, small_scan):
    work = tmp_path_factory.mktemp("capped")
    ckpt = make_checkpoint(work / "g.pt", small_scan)
    export_checkpoint(ckpt, work / "out", parity_sets=8, data_dir=small_scan, max_prototypes=40)
    return ckpt, work / "out"


def test_no_eager_weight_copy_and_capped_prototypes(capped):
    _, folder = capped
    manifest = load_manifest(folder)
    assert not (folder / "generator.pt").exists()
    assert "generator.pt" not in manifest.files
    assert manifest.prototypes == 40
    assert len(read_prototypes(folder / "prototypes.txt", 2)) == 40


def test_eager_model_from_model_ts_equals_the_checkpoint(capped, small_scan, tmp_path):
    ckpt, folder = capped
    original, _, _ = load_generator(ckpt)
    rebuilt, vocab, config = eager_model(folder, load_manifest(folder))
    want, got = original.state_dict(), rebuilt.state_dict()
    assert want.keys() == got.keys()
    assert all(torch.equal(want[k], got[k]) for k in want)
    run = sample_export(folder, n=3, backend="torch", strategy="temperature", nsamples=3,
                        max_rounds=5, log=lambda m: None)
    assert len(run.samples) <= 3 and config["data"] == "scan/jump" and len(vocab) > 10


def test_prototype_cap_must_be_positive(tmp_path, small_scan):
    ckpt = make_checkpoint(tmp_path / "g.pt", small_scan)
    with pytest.raises(UserError, match="max_prototypes 0: must be >= 1"):
        export_checkpoint(ckpt, tmp_path / "out", data_dir=small_scan, max_prototypes=0)
    assert not (tmp_path / "out").exists()


def test_parity_tolerance_is_relative_to_the_log_prob():
    import numpy as np

    from compgen.runtimes.artifact import logp_rel_diff, parity_failures

    eager = np.array([[-4.330175, -0.01, -40.0]], np.float32)
    close = eager + np.array([[-1.5e-4, 1e-6, 5.0]], np.float32)  # -40 is below the floor
    far = eager + np.array([[0.0, 2e-4, 0.0]], np.float32)        # log p near 0: 2e-4 apart
    assert logp_rel_diff(close, eager) == pytest.approx(1.5e-4 / 4.330175, rel=1e-2)
    assert logp_rel_diff(far, eager) == pytest.approx(2e-4, rel=1e-2)
    figures = {"backends": {"onnx": {"max_rel_logp_diff": logp_rel_diff(close, eager)},
                            "cpp": {"max_rel_logp_diff": logp_rel_diff(far, eager)}}}
    assert parity_failures(figures) == ["cpp: log-prob difference 2.00e-04 > 0.0001"]


def test_parity_skips_steps_past_a_rows_end():
    """Teacher forcing runs a short row on padding after its </s>, where no decoder goes:
    drift there is not a parity failure, drift at a reached step is."""
    import numpy as np

    from compgen.runtimes.artifact import logp_diff, logp_rel_diff

    eager = np.full((2, 3, 2), -1.0, np.float32)
    other = eager.copy()
    other[0, 2] += 1e-3                       # row 0 ends after step 1: step 2 is padding
    reached = np.array([[True, True, False], [True, True, True]])
    assert logp_rel_diff(other, eager, reached) == 0.0 == logp_diff(other, eager, reached)
    assert logp_rel_diff(other, eager) == pytest.approx(1e-3, rel=1e-2)
    other[1, 2] += 5e-4                       # row 1 reaches step 2
    assert logp_rel_diff(other, eager, reached) == pytest.approx(5e-4, rel=1e-2)
