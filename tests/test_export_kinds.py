"""The export kinds: one registered spec per checkpoint kind, one parity check for all."""


import numpy as np
import pytest
from test_export_predictor import train_tiny_predictor

from compgen.data.vocab import Vocab
from compgen.errors import UserError
from compgen.export import kinds
from compgen.export.spec import ParityOutputs, ParityRun, measure_parity
from compgen.runtimes.artifact import FORMAT, parity_failures, sha256
from compgen.runtimes.manifest_file import write_manifest_json
from compgen.training.checkpoint import KINDS as CHECKPOINT_KINDS


def test_every_checkpoint_kind_has_an_export_spec():
    assert sorted(kinds.KINDS) == sorted(CHECKPOINT_KINDS)
    for kind, spec in kinds.KINDS.items():
        assert spec.kind == kind and spec.name


def test_an_unregistered_kind_names_every_registered_one(tmp_path, small_scan, monkeypatch):
    checkpoint = train_tiny_predictor(tmp_path / "pred.pt", small_scan, steps=1)
    monkeypatch.delitem(kinds.KINDS, "seq2seq")
    with pytest.raises(UserError, match=r"a 'seq2seq' checkpoint; export takes generator "
                                        r"\('recombine'\) and inflection model \('inflection'\)"):
        kinds.export_checkpoint(checkpoint, tmp_path / "out", data_dir=small_scan)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pred.pt"]


def test_only_generator_folders_are_exported_again(tmp_path):
    folder = tmp_path / "predictor"
    folder.mkdir()
    Vocab.build([["a", "b"]]).save(folder / "vocab.json")
    manifest = {"format": FORMAT, "kind": "seq2seq", "model": {"vocab_size": 8},
                "decoding": {"max_len": 10}, "files": {"vocab.json": sha256(folder / "vocab.json")}}
    write_manifest_json(folder, manifest)
    with pytest.raises(UserError, match="re-exporting a 'seq2seq' export folder is not supported"):
        kinds.export_checkpoint(folder, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_one_parity_check_measures_every_backend():
    eager_logp = np.log(np.full((2, 3, 4), 0.25, dtype=np.float32))
    steps = np.array([[True, True, False], [True, True, True]])
    off = eager_logp.copy()
    off[0, 2] += 1.0        # a step no decoder reaches: not compared
    far = eager_logp.copy()
    far[1, 1, 0] += 2e-4
    eager = ParityOutputs({"greedy": [(5, 2), (6, 2)], "beam": [(5, 2), (7, 2)]}, eager_logp)
    run = ParityRun({"sources": 2, "backends": {}, "split": "test"}, eager, steps, {
        "same": lambda: ParityOutputs(dict(eager.outputs), off, {"seconds": 1}),
        "wrong_beam": lambda: ParityOutputs({"greedy": [(5, 2), (6, 2)],
                                             "beam": [(5, 2), (6, 2)]}, far),
        "outputs_only": lambda: ParityOutputs(dict(eager.outputs))})
    figures = measure_parity(run, relative_logp=True)
    assert list(figures) == ["sources", "backends", "split"]   # the kind's order is kept
    same, wrong, outputs_only = figures["backends"].values()
    assert same == {"greedy_identical": True, "beam_identical": True, "max_abs_logp_diff": 0.0,
                    "max_rel_logp_diff": 0.0, "seconds": 1}
    assert wrong["greedy_identical"] and not wrong["beam_identical"]
    assert wrong["max_abs_logp_diff"] == pytest.approx(2e-4, rel=1e-2)
    assert wrong["max_rel_logp_diff"] == pytest.approx(2e-4 / np.log(4), rel=1e-2)  # |log p| 1.39
    assert outputs_only == {"greedy_identical": True, "beam_identical": True}
    failures = parity_failures({**figures, "tolerance": 1e-4})
    assert failures == ["wrong_beam: beam outputs differ from the eager model",
                        "wrong_beam: log-prob difference 1.44e-04 > 0.0001"]
    assert parity_failures({**figures, "tolerance": 1e-3}) == failures[:1]
