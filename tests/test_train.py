"""Generator training: checkpoints, resume, presets, the train CLI on real data."""

import json
import subprocess
from pathlib import Path

import pytest
import torch

from compgen.data import load_dataset
from compgen.data.vocab import SEP, Vocab
from compgen.errors import UserError
from compgen.models.recombine import collate_prototypes
from compgen.runtimes.eager import decode_batch
from compgen.training.checkpoint import (
    apply_overrides,
    build_recombine,
    load_checkpoint,
    load_generator,
    load_preset,
    preset_names,
)
from compgen.training.generator import train_generator
from compgen.training.generator_data import GeneratorData

ROOT = Path(__file__).resolve().parents[1]
COMPGEN = str(ROOT / ".venv" / "bin" / "compgen")
torch.set_num_threads(1)


def tiny_config(**model):
    cfg = load_preset("recombine_scan")
    return apply_overrides(cfg, {"model.hidden": 16, "model.embed": 8, "model.attdim": 8,
                                 "train.batch_size": 4, "train.epochs": 2, "train.log_every": 1,
                                 **{f"model.{k}": v for k, v in model.items()}})


def scan_items(table, n=24):
    """(x, prototypes) items from real SCAN jump training pairs (prototypes: the next two
    data), a stand-in for neighbourhoods that keeps the test fast."""
    rows = table.filter(table["split"] == "train").unique(subset=["x", "y"], maintain_order=True).head(n + 2)
    data = [x + [SEP] + y for x, y in zip(rows["x"].to_list(), rows["y"].to_list())]
    return [(data[i], [data[i + 1], data[i + 2]]) for i in range(n)]


@pytest.fixture(scope="module")
def prepared(data_dir):
    table = load_dataset("scan/jump", data_dir)
    items = scan_items(table)
    vocab = Vocab.from_table(table.filter(table["split"] == "train"))
    return GeneratorData(vocab, items[:20], items[20:], "scan", "jump", table)


def weights(path):
    return load_checkpoint(path).weights


def test_resume_matches_uninterrupted_run(tmp_path, prepared):
    cfg = tiny_config()
    full = tmp_path / "full.pt"
    r = train_generator(cfg, "scan/jump", full, prepared=prepared, progress=False, log=lambda s: None)
    assert r.finished and r.steps == 10  # 2 epochs x 5 batches
    part = tmp_path / "part.pt"
    r1 = train_generator(cfg, "scan/jump", part, prepared=prepared, max_steps=7, progress=False,
                         log=lambda s: None)
    assert not r1.finished and load_checkpoint(part).train_state["step"] == 7
    r2 = train_generator(cfg, "scan/jump", part, prepared=prepared, resume=True, progress=False,
                         log=lambda s: None)
    assert r2.finished and r2.steps == 10
    a, b = weights(full), weights(part)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k
    curve = (tmp_path / "part.pt.loss.csv").read_text().splitlines()
    assert curve[0].startswith("step,epoch") and len(curve) > 10
    # resuming with another model config is refused
    with pytest.raises(UserError, match="different model config"):
        train_generator(tiny_config(nproto=1), "scan/jump", part, prepared=prepared, resume=True,
                        progress=False, log=lambda s: None)


def test_finished_run_trains_on_to_more_epochs(tmp_path, prepared):
    cfg = tiny_config()
    full = tmp_path / "full.pt"
    train_generator(cfg, "scan/jump", full, prepared=prepared, progress=False, log=lambda s: None)
    short = tmp_path / "short.pt"
    r1 = train_generator(cfg, "scan/jump", short, prepared=prepared, epochs=1, progress=False,
                         log=lambda s: None)
    assert r1.finished and r1.steps == 5
    # resuming a finished run without epochs changes nothing
    again = train_generator(cfg, "scan/jump", short, prepared=prepared, resume=True,
                            progress=False, log=lambda s: None)
    assert again.finished and again.steps == 5
    longer = train_generator(cfg, "scan/jump", short, prepared=prepared, resume=True, epochs=2,
                             progress=False, log=lambda s: None)
    assert longer.finished and longer.steps == 10
    assert load_checkpoint(short).config["train"]["epochs"] == 2
    # one epoch + one more = two epochs in one go (one dev epoch: its best is its last)
    a, b = weights(full), weights(short)
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6), k


def test_checkpoint_round_trip_same_outputs(tmp_path, prepared):
    cfg = tiny_config(outdrop_test=False)
    path = tmp_path / "g.pt"
    train_generator(cfg, "scan/jump", path, prepared=prepared, max_steps=3, progress=False,
                    log=lambda s: None)
    ckpt = load_checkpoint(path, kind="recombine")
    assert ckpt.config["model"]["variant"] == "scan" and ckpt.config["data"] == "scan/jump"
    assert ckpt.vocab == prepared.vocab
    # a safetensors file: 8-byte header length + JSON header, no pickle
    raw = path.read_bytes()
    header = json.loads(raw[8:8 + int.from_bytes(raw[:8], "little")])
    assert header["__metadata__"]["kind"] == "recombine"
    model = build_recombine(ckpt.config, len(ckpt.vocab))
    model.load_state_dict(ckpt.weights)
    model.eval()
    loaded, vocab, _ = load_generator(path)
    protos = collate_prototypes([[vocab.encode(p) for p in ps] for _, ps in prepared.train[:5]],
                                "scan", 45)
    a = decode_batch(model, protos, "greedy", max_len=20)
    b = decode_batch(loaded, protos, "greedy", max_len=20)
    assert torch.equal(a.tokens, b.tokens) and torch.allclose(a.scores, b.scores)
    with pytest.raises(UserError, match="expected 'seq2seq'"):
        load_checkpoint(path, kind="seq2seq")


def test_presets_parse_and_match_reference_values():
    names = preset_names()
    for name in ("recombine_scan", "recombine_sig", "rnnlm_scan", "rnnlm_sig", "proto_scan",
                 "proto_sig", "recombine_scan_cpu", "recombine_sig_cpu"):
        assert name in names
        cfg = load_preset(name)
        assert cfg["kind"] == "recombine" and {"model", "train", "sample"} <= cfg.keys()
    scan, sig = load_preset("recombine_scan"), load_preset("recombine_sig")
    assert (scan["model"]["hidden"], scan["model"]["embed"], scan["model"]["attdim"]) == (512, 64, 128)
    assert (scan["train"]["batch_size"], scan["train"]["lr"], scan["train"]["epochs"]) == (32, 0.002, 8)
    assert (sig["model"]["hidden"], sig["model"]["zdim"], sig["model"]["kappa"]) == (1024, 1, 1.0)
    assert (sig["train"]["lr"], sig["train"]["epochs"], sig["train"]["gradnorm"]) == (0.0001, 25, 0.0)
    with pytest.raises(UserError, match="unknown config"):
        load_preset("no_such_preset")


def test_train_on_real_scan_neighbourhoods(tmp_path, data_dir):
    """The full path: real SCAN jump data -> neighbourhood triples -> 90/10 split -> two
    updates of a tiny recomb-2 model -> a resumable checkpoint."""
    cfg = apply_overrides(load_preset("recombine_scan_cpu"), {
        "model.hidden": 16, "model.embed": 8, "model.attdim": 8, "train.batch_size": 4})
    out = tmp_path / "g.pt"
    r = train_generator(cfg, "scan/jump", out, data_dir=data_dir, max_steps=2, progress=False,
                        log=lambda s: None)
    assert not r.finished and r.steps == 2
    ckpt = load_checkpoint(out, kind="recombine")
    assert ckpt.train_state["step"] == 2 and ckpt.config["model"]["hidden"] == 16
    assert len(ckpt.vocab) == 25  # 6 specials + 13 words + 6 actions


def test_train_cli_bad_input(tmp_path):
    r = subprocess.run([COMPGEN, "train", "generator", "--data", "scan/jump", "--nproto", "3",
                        "-o", str(tmp_path / "g.pt")], capture_output=True, text=True, check=False)
    assert r.returncode == 2 and "--nproto" in r.stderr and "Traceback" not in r.stderr
