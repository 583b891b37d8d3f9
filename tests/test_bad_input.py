"""Bad input of any kind: one ``error: FILE[:LINE]: ...`` line on stderr and exit status 2,
never a traceback. The CLI runs in-process (as ``compgen`` would), so each case is cheap."""

import os
import sys
from pathlib import Path

import pytest

from compgen.cli import main

ROOT = Path(__file__).resolve().parents[1]

BINARY = bytes(range(256)) * 20          # NUL bytes and invalid UTF-8
LATIN1 = "caf\u00e9 jump\n".encode("latin-1")  # text, but not UTF-8


def run(capsys, monkeypatch, *args) -> tuple[int, list[str]]:
    """(exit status, stderr lines) of ``compgen ARGS``."""
    monkeypatch.setattr(sys, "argv", ["compgen", *map(str, args)])
    monkeypatch.setenv("COLUMNS", "400")
    with pytest.raises(SystemExit) as stop:
        main()
    err = capsys.readouterr().err
    return stop.value.code, [line for line in err.splitlines() if line.strip()]


def assert_one_error(result, *fragments):
    code, lines = result
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, lines)
    for fragment in fragments:
        assert str(fragment) in lines[0], lines[0]


@pytest.mark.parametrize("content", [BINARY, LATIN1], ids=["binary", "latin1"])
@pytest.mark.parametrize("command", [
    ["data", "stats", "{f}"],
    ["augment", "geca", "{f}", "-o", "{out}"],
    ["lm", "train", "{f}", "-o", "{out}.arpa", "--discount_fallback"],
    ["train", "predictor", "--data", "scan/jump", "--augment", "{f}", "-o", "{out}.pt"],
], ids=["stats", "geca", "lm-train", "train-augment"])
def test_text_readers_refuse_binary_input(tmp_path, capsys, monkeypatch, content, command):
    bad = tmp_path / "g.bin"
    bad.write_bytes(b"IN: jump OUT: I_JUMP\n" + content)
    args = [a.format(f=bad, out=tmp_path / "out") for a in command]
    assert_one_error(run(capsys, monkeypatch, *args), f"{bad}:2:")
    assert sorted(os.listdir(tmp_path)) == ["g.bin"]


def test_samples_tsv_rows_must_have_the_same_width(tmp_path, capsys, monkeypatch):
    ragged = tmp_path / "s.txt"
    ragged.write_text("a\tb\nc\td\tV;PST\n")
    assert_one_error(run(capsys, monkeypatch, "data", "stats", ragged), f"{ragged}:2:",
                     "3 tab-separated fields, expected 2")


def test_samples_tsv_score_columns_are_numbers(tmp_path, capsys, monkeypatch):
    scored = tmp_path / "s.tsv"
    scored.write_text("#x\ty\tlogprob\njump twice\tI_JUMP I_JUMP\t-1.5\nwalk\tI_WALK\tlow\n")
    assert_one_error(run(capsys, monkeypatch, "data", "stats", scored), f"{scored}:3:",
                     "not a number")


def test_a_samples_tsv_with_scores_is_not_read_as_sigmorphon(tmp_path):
    from compgen.data import read_data_file

    scored = tmp_path / "s.txt"
    scored.write_text("#x\ty\tlogprob\njump twice\tI_JUMP I_JUMP\t-1.5\n")
    table = read_data_file(scored)
    assert table["x"].to_list() == [["jump", "twice"]] and table["y"].to_list() == [["I_JUMP", "I_JUMP"]]


# ---------------------------------------------------------------- outputs checked first

@pytest.mark.parametrize("command,output,message", [
    (["lm", "train", "lm/kin", "--discount_fallback", "-o"], "{folder}", "is a folder"),
    (["lm", "train", "lm/kin", "--discount_fallback", "-o"], "{file}/kin.arpa", "is not a folder"),
    (["train", "generator", "--data", "scan/jump", "--max-steps", "1", "-o"], "/proc/g.pt",
     "cannot write in /proc"),
    (["augment", "geca", "scan/jump", "--n-sample", "5", "-o"], "{folder}", "is a folder"),
    (["export", "{file}", "-o"], "{file}", "exists and is not a folder"),
], ids=["lm-folder", "lm-under-a-file", "train-proc", "geca-folder", "export-onto-a-file"])
def test_outputs_are_checked_before_the_work(tmp_path, capsys, monkeypatch, command, output,
                                             message):
    (tmp_path / "folder").mkdir()
    (tmp_path / "file").write_text("x\n")
    names = {"folder": tmp_path / "folder", "file": tmp_path / "file"}
    args = [a.format(**names) for a in command] + [output.format(**names)]
    assert_one_error(run(capsys, monkeypatch, *args), message)
    assert sorted(os.listdir(tmp_path)) == ["file", "folder"] and not os.listdir(names["folder"])


def test_resume_needs_the_checkpoint(tmp_path, capsys, monkeypatch):
    missing = tmp_path / "g.pt"
    assert_one_error(run(capsys, monkeypatch, "train", "generator", "--data", "scan/jump",
                         "--max-steps", "1", "--resume", "-o", missing),
                     f"-o {missing}: no such checkpoint to --resume")
    assert not missing.exists()


# ---------------------------------------------------------------- umask and leftovers

@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_outputs_follow_the_umask(tmp_path, mask):
    from compgen.io import write_samples_tsv
    from compgen.runtimes.artifact import staged_folder

    before = os.umask(mask)
    try:
        write_samples_tsv(tmp_path / "s.tsv", [(["a"], ["b"])])
        with staged_folder(tmp_path / "export") as folder:
            (folder / "x").write_text("x")
    finally:
        os.umask(before)
    assert (tmp_path / "s.tsv").stat().st_mode & 0o777 == 0o666 & ~mask
    assert (tmp_path / "export").stat().st_mode & 0o777 == 0o777 & ~mask


def killed_while_writing(tmp_path, code: str):
    """Start a Python process that runs ``code`` (it stops inside a write), kill -9 it."""
    import signal
    import subprocess

    ready = tmp_path / "ready"
    proc = subprocess.Popen([sys.executable, "-c", code.format(tmp=tmp_path, ready=ready)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    import time

    deadline = time.monotonic() + 60
    while not ready.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    ready.unlink()


def test_a_killed_writer_leaves_nothing_after_the_next_run(tmp_path):
    from compgen.io import atomic_open
    from compgen.runtimes.artifact import staged_folder

    killed_while_writing(tmp_path, """
import pathlib, time
from compgen.io import atomic_open
from compgen.runtimes.artifact import staged_folder
with atomic_open(pathlib.Path("{tmp}") / "out.tsv") as f, staged_folder(pathlib.Path("{tmp}") / "exp") as d:
    f.write("half"); f.flush(); (d / "model.ts").write_text("half")
    pathlib.Path("{ready}").touch()
    time.sleep(60)
""")
    leftovers = sorted(p.name for p in tmp_path.iterdir())
    assert len(leftovers) == 2 and all(n.startswith((".out.tsv.", ".exp.")) for n in leftovers)
    with atomic_open(tmp_path / "out.tsv") as f:
        f.write("whole\n")
    with staged_folder(tmp_path / "exp") as folder:
        (folder / "model.ts").write_text("whole")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exp", "out.tsv"]


def test_a_live_writers_staging_file_is_kept(tmp_path):
    from compgen.io import atomic_open

    with atomic_open(tmp_path / "out.tsv") as first:
        first.write("one")
        with atomic_open(tmp_path / "out.tsv") as second:
            second.write("two")
    assert (tmp_path / "out.tsv").read_text() == "one"
    assert [p.name for p in tmp_path.iterdir()] == ["out.tsv"]


# ---------------------------------------------------------------- evaluate, memory

def test_evaluate_reads_a_data_file_as_its_test_set(tmp_path, capsys, monkeypatch):
    import torch

    from compgen.data import Vocab, load_dataset
    from compgen.models.seq2seq import Seq2Seq, Seq2SeqConfig
    from compgen.training.predictor import conditional_pairs, save_predictor

    table = load_dataset("scan/jump")
    vocab = Vocab.build([t for x, y in conditional_pairs(table) for t in (x, y)])
    torch.manual_seed(0)
    model = Seq2Seq(Seq2SeqConfig(vocab_size=len(vocab), hidden=16, embed=8, max_len=45))
    save_predictor(tmp_path / "p.pt", model.eval(), vocab, {"data": "scan/jump", "seed": 0})
    test = tmp_path / "mine.txt"
    test.write_text("IN: jump twice OUT: I_JUMP I_JUMP\nIN: walk OUT: I_WALK\n")
    code, _ = run(capsys, monkeypatch, "evaluate", tmp_path / "p.pt", "--data", test,
                  "-o", tmp_path / "r.csv")
    assert code in (0, None)
    import polars as pl

    rows = pl.read_csv(tmp_path / "r.csv")
    assert rows["n"].to_list()[0] == 2 and rows["data"].to_list()[0] == str(test)


def test_a_failed_allocation_is_one_line_with_its_size(tmp_path):
    import resource
    import subprocess

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))

    proc = subprocess.run([sys.executable, "-m", "compgen", "train", "generator", "--data",
                           "scan/jump", "--hidden", "300000", "--max-steps", "1", "-o",
                           str(tmp_path / "g.pt")], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, preexec_fn=limit,
                          check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("error: an allocation of ") and "GB failed" in lines[0]
    assert "the address-space limit (ulimit -v) is 6.0 GB" in lines[0]


def test_a_limit_too_low_for_torch_and_polars_is_refused_before_any_work(tmp_path):
    # at 1.5 GB generator training used to abort inside Polars (exit 134)
    import resource
    import subprocess

    def limit():
        resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))

    out = tmp_path / "g.pt"
    proc = subprocess.run([sys.executable, "-m", "compgen", "train", "generator", "--data",
                           "scan/jump", "--max-steps", "1", "-o", str(out)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          preexec_fn=limit, check=False)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-2000:]
    assert lines[0].startswith("error: the address-space limit (ulimit -v) is 1.40 GB")
    assert not out.exists()


def test_cpp_sampling_leaves_nothing_in_the_temp_folder(tmp_path, capsys, monkeypatch):
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    code, _ = run(capsys, monkeypatch, "sample", ROOT / "exported" / "scan-jump-recomb2",
                  "--backend", "cpp", "--n", "5", "-o", tmp_path / "s.tsv")
    assert code in (0, None) and len((tmp_path / "s.tsv").read_text().splitlines()) >= 5
    assert os.listdir(temp) == []


# ---------------------------------------------------------------- checkpoints

@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A consistent generator checkpoint on SCAN jump's vocabulary (untrained, tiny)."""
    import torch

    from compgen.data import Vocab, load_dataset
    from compgen.training.checkpoint import build_recombine, load_preset, save_checkpoint

    config = load_preset("recombine_scan_cpu")
    config["data"] = "scan/jump"
    config["model"].update(hidden=16, embed=8, attdim=8)
    vocab = Vocab.from_table(load_dataset("scan/jump"))
    torch.manual_seed(0)
    model = build_recombine(config, len(vocab))
    optimizer = torch.optim.Adam(model.parameters())
    path = tmp_path_factory.mktemp("ckpt") / "g.pt"
    save_checkpoint(path, model, config, vocab, "recombine", optimizer,
                    train_state={"step": 1, "epoch": 0, "batch": 1, "done": False, "curve": []})
    return path


def rewritten(source, target, metadata=None, tensors=None):
    """A copy of checkpoint ``source`` with metadata keys replaced (None deletes one) and
    tensors replaced or added (None deletes one): a well-formed safetensors file."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    with safe_open(str(source), "pt") as f:
        meta = dict(f.metadata())
    stored = load_file(str(source))
    for updates, into in ((metadata or {}, meta), (tensors or {}, stored)):
        for key, value in updates.items():
            if value is None:
                into.pop(key, None)
            else:
                into[key] = value
    save_file(stored, str(target), metadata=meta)
    return target


def model_config(source, values: dict) -> str:
    """The config metadata of ``source`` with ``values`` set in its [model] table."""
    import json

    from safetensors import safe_open

    with safe_open(str(source), "pt") as f:
        config = json.loads(f.metadata()["config"])
    config["model"].update(values)
    return json.dumps(config)


@pytest.mark.parametrize("change,message", [
    ({"metadata": {"kind": None}}, "unknown checkpoint kind None"),
    ({"metadata": {"config": "{not json"}}, "metadata 'config' is not JSON"),
    ({"metadata": {"config": "[1, 2]"}}, "'config' is not a JSON object"),
    ({"metadata": {"config": '{"data": "scan/jump"}'}}, "config without a [model] table"),
    ({"metadata": {"vocab": '{"tokens": 3}'}}, "'tokens' must be a list"),
    ({"metadata": {"train_state": "nan]"}}, "'train_state' is not JSON"),
    ({"metadata": {"optim_groups": "{}"}}, "'optim_groups' is not a JSON list"),
    ({"metadata": {"config": {"hidden": 1_000_000_000}}}, "bad model config in the checkpoint"),
    ({"metadata": {"config": {"max_len": -1}}}, "model.max_len = -1 (must be an integer >= 1)"),
    ({"metadata": {"config": {"pdrop": 2.0}}}, "model.pdrop = 2.0 (must be in [0, 1)"),
    ({"metadata": {"config": {"embed": "8"}}}, "model.embed = '8'"),
    ({"tensors": {"model.decoder.weight_ih": "SMALL"}}, "decoder.weight_ih is [2, 2]"),
    ({"tensors": {"junk.x": "SMALL"}}, "unexpected tensor 'junk.x'"),
    ({"tensors": {"model.extra": "SMALL"}}, "unexpected weight 'extra'"),
], ids=["no-kind", "config-json", "config-list", "no-model", "vocab", "state-json",
        "groups", "hidden-1e9", "max-len-negative", "dropout-2", "embed-text", "shape", "junk-tensor", "extra-weight"])
@pytest.mark.parametrize("command", [
    ["sample", "{ckpt}", "--n", "2", "-o", "{out}.tsv"],
    ["export", "{ckpt}", "--no-cpp", "-o", "{out}"],
    ["inspect", "{ckpt}"],
    ["train", "generator", "--resume", "--max-steps", "2", "-o", "{ckpt}"],
], ids=["sample", "export", "inspect", "resume"])
def test_inconsistent_checkpoints_are_one_error(tiny_checkpoint, tmp_path, capsys, monkeypatch,
                                                change, message, command):
    import torch

    small = torch.zeros(2, 2)
    meta = {k: model_config(tiny_checkpoint, v) if isinstance(v, dict) else v
            for k, v in change.get("metadata", {}).items()}
    tensors = {k: small for k in change.get("tensors", {})}
    ckpt = rewritten(tiny_checkpoint, tmp_path / "bad.pt", meta, tensors)
    args = [a.format(ckpt=ckpt, out=tmp_path / "out") for a in command]
    assert_one_error(run(capsys, monkeypatch, *args), f"{ckpt}: ", message)
    assert sorted(os.listdir(tmp_path)) == ["bad.pt"]


def test_a_damaged_training_state_cannot_be_resumed(tiny_checkpoint, tmp_path, capsys,
                                                    monkeypatch):
    ckpt = rewritten(tiny_checkpoint, tmp_path / "bad.pt", {"train_state": '{"step": "seven"}'})
    assert_one_error(run(capsys, monkeypatch, "train", "generator", "--resume", "--max-steps",
                         "2", "-o", ckpt), "damaged training state (step = 'seven')")


# ---------------------------------------------------------------- export folders

SHIPPED = ROOT / "exported" / "scan-jump-recomb2"


def edited_export(tmp_path, edit_manifest=None, files=None):
    """A copy of the shipped export with files replaced (bytes, re-hashed in the manifest,
    so only later checks can catch them) and the manifest edited."""
    import json
    import shutil

    from compgen.runtimes.artifact import sha256
    from compgen.runtimes.manifest_file import write_manifest_json

    folder = tmp_path / "export"
    shutil.copytree(SHIPPED, folder)
    manifest = json.loads((folder / "manifest.json").read_text())
    for name, content in (files or {}).items():
        (folder / name).write_bytes(content(folder) if callable(content) else content)
        manifest["files"][name] = sha256(folder / name)
    if edit_manifest:
        edit_manifest(manifest)
    write_manifest_json(folder, manifest)
    return folder


def perturbed_model(folder):
    """model.ts with one weight changed: a well-formed model that is not the ONNX graphs'."""
    import io

    import torch

    scripted = torch.jit.load(str(folder / "model.ts"))
    with torch.no_grad():
        for name, tensor in scripted.named_parameters():   # shared weights appear once
            if name.endswith(("out.weight", "decoder.weight_hh")):
                tensor.mul_(-1.0)
    buffer = io.BytesIO()
    torch.jit.save(scripted, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("edit,files,message", [
    (lambda m: m.pop("files"), None, "no file checksums"),
    (lambda m: m.update(files={}), None, "no file checksums"),
    (lambda m: m["decoding"].update(max_len=10**9), None, "decoding.max_len = 1000000000"),
    (lambda m: m["model"].update(vocab_size="25"), None, "model.vocab_size = '25'"),
    (lambda m: m["decoding"].pop("prototype_encoding"), None, "per-prototype encoder graph"),
    (None, {"model.ts": BINARY}, "cannot load the TorchScript model"),
    (None, {"model.ts": perturbed_model}, "model.ts and the ONNX graphs disagree"),
    (None, {"decoder_step.onnx": lambda f: (f / "encoder.onnx").read_bytes()},
     "the ONNX graphs does not run"),
    (None, {"encoder.onnx": BINARY}, "cannot load ONNX graph"),
    (None, {"prototypes.txt": BINARY}, "prototypes.txt:1: binary data"),
    (None, {"prototypes.txt": b"1 2 999\t3 4\n"}, "token ids outside the vocabulary"),
    (None, {"vocab.json": LATIN1}, "vocab.json:1: not UTF-8"),
    (None, {"extra.bin": b"x"}, None),
], ids=["no-files", "empty-files", "max-len", "vocab-size-type", "old-contract", "binary-model",
        "foreign-model", "foreign-step-graph", "binary-encoder", "binary-prototypes",
        "prototype-ids", "latin1-vocab", "rehashed-extra"])
def test_export_folders_are_verified_on_load(tmp_path, capsys, monkeypatch, edit, files,
                                             message):
    folder = edited_export(tmp_path, edit, files)
    if message is None:   # a listed extra file is harmless; an unlisted one is refused
        (folder / "unlisted.bin").write_bytes(b"x")
        message = "unlisted.bin: not listed in the manifest"
    assert_one_error(run(capsys, monkeypatch, "sample", folder, "--n", "3", "-o",
                         tmp_path / "s.tsv"), message)
    assert not (tmp_path / "s.tsv").exists()


def test_a_folder_that_failed_the_backend_check_fails_it_again(tmp_path, capsys, monkeypatch):
    folder = edited_export(tmp_path, files={"model.ts": perturbed_model})
    for _ in range(2):   # a failed check leaves no record that would skip the next one
        assert_one_error(run(capsys, monkeypatch, "sample", folder, "--n", "3"),
                         "model.ts and the ONNX graphs disagree")


def test_manifest_json_that_is_binary_is_one_error(tmp_path, capsys, monkeypatch):
    folder = edited_export(tmp_path)
    (folder / "manifest.json").write_bytes(BINARY)
    assert_one_error(run(capsys, monkeypatch, "sample", folder, "--n", "3"),
                     f"{folder / 'manifest.json'}:1: binary data")


def test_the_shipped_export_passes_the_load_checks(tmp_path, capsys, monkeypatch):
    code, _ = run(capsys, monkeypatch, "sample", SHIPPED, "--n", "3", "-o", tmp_path / "s.tsv")
    assert code in (0, None) and len((tmp_path / "s.tsv").read_text().splitlines()) >= 3


def test_a_huge_augmented_line_is_cut_before_it_is_encoded(tmp_path, monkeypatch):
    from compgen.data.vocab import Vocab
    from compgen.training.predictor import train_predictor

    data = tmp_path / "train.txt"
    data.write_text("".join(f"IN: {a} {b} OUT: I_{a.upper()} I_{b.upper()}\n"
                            for a in ("walk", "run", "look", "jump") for b in ("walk", "run")))
    augment = tmp_path / "aug.tsv"
    augment.write_text("walk " * 250_000 + "\tI_WALK\nrun\tI_RUN\n")   # a 1.2 MB line
    longest = [0]
    encode = Vocab.encode

    def measured(self, tokens):
        longest[0] = max(longest[0], len(tokens))
        return encode(self, tokens)

    monkeypatch.setattr(Vocab, "encode", measured)
    preset = {"model": {"hidden": 8, "embed": 8, "pdrop": 0.0, "max_len": 45},
              "train": {"batch_size": 4, "lr": 0.01, "gradnorm": 1.0, "epochs": 2, "patience": 0}}
    summary = train_predictor(str(data), preset, tmp_path / "p.pt", augment=augment, p_aug=0.5)
    assert summary["n_augmented"] == 2 and 0 < longest[0] <= 46
