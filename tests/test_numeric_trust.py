"""Numbers that used to write or continue garbage, or end in a traceback, are one error
line before any work: non-finite weights in a checkpoint (resume, export, sample), the
train commands' numeric options out of range, sampling counts and widths beyond what a
backend can hold; and no command leaves torch's compiler cache in the temp folder."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

import compgen
from compgen.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
PAIRS = "jump\tJUMP\nwalk\tWALK\njump twice\tJUMP JUMP\nwalk twice\tWALK WALK\nrun\tRUN\n"
TINY = {"model.hidden": 16, "model.embed": 8, "model.attdim": 8, "train.epochs": 1}


def compgen_cli(*args, temp: Path | None = None):
    """``compgen ARGS`` in a subprocess (a fresh temp folder must be seen by torch)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    if temp is not None:
        env["TMPDIR"] = str(temp)
    proc = subprocess.run([sys.executable, "-m", "compgen", *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=False, timeout=600)
    return proc.returncode, [line for line in proc.stderr.splitlines() if line.strip()]


def one_error(result, *fragments) -> None:
    code, lines = result
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, lines)
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A generator checkpoint (hidden 16, one epoch) and its pairs."""
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "d.tsv").write_text(PAIRS, encoding="utf-8")
    compgen.train_generator(folder / "d.tsv", folder / "g.pt", overrides=TINY)
    return folder


def with_nonfinite(source: Path, target: Path, prefix: str, value: float) -> str:
    """A copy of checkpoint ``source`` whose first tensor under ``prefix`` holds ``value``;
    returns that tensor's name."""
    with safe_open(str(source), "pt") as handle:
        metadata = dict(handle.metadata())
    tensors = load_file(str(source))
    name = min(key for key in tensors if key.startswith(prefix))
    tensors[name].view(-1)[0] = value
    save_file(tensors, str(target), metadata=metadata)
    return name


@pytest.mark.parametrize("prefix,value", [("model.", float("nan")), ("optim.", float("inf"))])
def test_resuming_a_checkpoint_with_nonfinite_tensors_is_refused(tiny, tmp_path, prefix, value):
    bad = tmp_path / "bad.pt"
    name = with_nonfinite(tiny / "g.pt", bad, prefix, value)
    before = bad.read_bytes()
    one_error(compgen_cli("train", "generator", "--resume", "--epochs", "2", "-o", bad,
                          "--quiet"), str(bad), name, "NaN or infinite")
    assert bad.read_bytes() == before   # nothing continued, nothing rewritten


def test_export_and_sampling_refuse_nonfinite_weights_and_leave_no_compiler_cache(tiny,
                                                                                   tmp_path):
    bad = tmp_path / "bad.pt"
    name = with_nonfinite(tiny / "g.pt", bad, "model.", float("nan"))
    temp = tmp_path / "temp"
    temp.mkdir()
    one_error(compgen_cli("export", bad, "-o", tmp_path / "exp", temp=temp), str(bad), name)
    assert not (tmp_path / "exp").exists()
    one_error(compgen_cli("sample", bad, "--n", "3", "-o", tmp_path / "s.tsv", temp=temp),
              str(bad), name)
    assert not (tmp_path / "s.tsv").exists()
    # ONNX Runtime's one fixed session file aside, the temp folder is as it was
    assert [p.name for p in temp.iterdir() if p.name != ".ses"] == []
    with pytest.raises(UserError, match=f"{name} holds NaN"):
        compgen.export_model(bad, tmp_path / "exp2")


def test_a_good_export_leaves_nothing_in_the_temp_folder(tiny, tmp_path):
    temp = tmp_path / "temp"
    temp.mkdir()
    code, lines = compgen_cli("export", tiny / "g.pt", "--no-cpp", "-o", tmp_path / "exp",
                              temp=temp)
    assert code == 0, lines
    assert (tmp_path / "exp" / "manifest.json").is_file()
    assert [p.name for p in temp.iterdir() if p.name != ".ses"] == []


@pytest.mark.parametrize("option,value,message", [
    ("--time-budget", "nan", "--time-budget nan: must be a finite number"),
    ("--time-budget", "-1", "--time-budget -1.0: must be > 0"),
    ("--lr", "nan", "--lr nan: must be a finite number"),
    ("--lr", "-1", "--lr -1.0: must be > 0"),
    ("--max-steps", "-5", "--max-steps -5: must be an integer >= 0"),
    ("--hidden", str(10**20), f"--hidden {10**20}: too large (at most 1,048,576"),
    ("--nproto", "3", "--nproto 3: too large (at most 2)"),
])
def test_the_generator_commands_numeric_options_are_checked_first(tiny, tmp_path, option, value,
                                                                  message):
    out = tmp_path / "g.pt"
    one_error(compgen_cli("train", "generator", "--data", tiny / "d.tsv", option, value, "-o",
                          out), message)
    assert not out.exists() and not Path(f"{out}.loss.csv").exists()


@pytest.mark.parametrize("option,value,message", [
    ("--p-aug", "nan", "--p-aug nan: must be a finite number"),
    ("--max-len", "-1", "--max-len -1: must be an integer >= 1"),
    ("--keep-every", "-1", "--keep-every -1: must be an integer >= 0"),
])
def test_the_predictor_commands_numeric_options_are_checked_first(tiny, tmp_path, option,
                                                                  value, message):
    one_error(compgen_cli("train", "predictor", "--data", tiny / "d.tsv", option, value, "-o",
                          tmp_path / "p.pt"), message)
    assert not (tmp_path / "p.pt").exists()


@pytest.mark.parametrize("call,message", [
    (lambda d, o: compgen.train_generator(d, o, max_steps=-5), "max_steps -5: must be an integer"),
    (lambda d, o: compgen.train_generator(d, o, epochs=0), "epochs 0: must be an integer >= 1"),
    (lambda d, o: compgen.train_predictor(d, o, p_aug=float("nan")), "p_aug nan: must be a finite"),
    (lambda d, o: compgen.train_predictor(d, o, seed=2**64), "seed 18446744073709551616"),
])
def test_the_api_train_functions_check_their_numbers_first(tiny, tmp_path, call, message):
    with pytest.raises(UserError, match=message):
        call(tiny / "d.tsv", tmp_path / "o.pt")
    assert not (tmp_path / "o.pt").exists()


def test_a_negative_seed_trains_both_models(tiny, tmp_path):
    """Any signed 64-bit seed is valid (check_seed): -1 used to end in numpy's traceback."""
    overrides = {"model.hidden": 16, "model.embed": 8, "model.max_len": 8}
    summary = compgen.train_predictor(tiny / "d.tsv", tmp_path / "p.pt", seed=-1, epochs=1,
                                      overrides=overrides)
    assert summary["epochs"] == 1 and (tmp_path / "p.pt").is_file()
    result = compgen.train_generator(tiny / "d.tsv", tmp_path / "g.pt",
                                     overrides={**TINY, "train.seed": -1})
    assert result.finished and torch.isfinite(
        load_file(str(tmp_path / "g.pt"))["model.out.weight"]).all()


SHIPPED = ROOT / "exported" / "scan-jump-recomb2"


@pytest.mark.parametrize("option,value,message", [
    ("--beam-width", "1000000", "--beam-width 1000000: too large (at most 1,024"),
    ("--n", str(2**70), f"--n {2**70}: too large (at most 1,099,511,627,776"),
    ("--batch-size", "100000000", "--batch-size 100000000: too large (at most 65,536"),
    ("--threads", "1000000", "--threads 1000000: must be from 1 to"),
])
@pytest.mark.parametrize("backend", ["cpp", "onnx"])
def test_sampling_counts_and_widths_beyond_their_bound_are_one_line(tmp_path, backend, option,
                                                                    value, message):
    out = tmp_path / "s.tsv"
    one_error(compgen_cli("sample", SHIPPED, "--backend", backend, "--strategy", "beam", "--n",
                          "2", option, value, "-o", out), message)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("key,value", [("threads", 1_000_000), ("beam_width", 1_000_000),
                                       ("n", 2**70), ("batch_size", -3)])
def test_the_runner_refuses_out_of_range_job_numbers_itself(tmp_path, key, value):
    """Called directly (no Python in front), the runner answers one error line, exit 2,
    instead of aborting on a million threads or beams or a count that overflowed."""
    from compgen.decoding.contract import Contract
    from compgen.decoding.options import SampleOptions
    from compgen.runtimes.cpp import build_runner, job_text
    from compgen.runtimes.manifest_file import read_manifest_json

    contract = Contract.from_manifest(read_manifest_json(SHIPPED)["decoding"])
    options = SampleOptions(strategy="greedy", temperature=1.0, seed=0, n=2, batch_size=8,
                            max_rounds=1, threads=1)
    job = job_text(SHIPPED, contract, options, out=tmp_path / "s.tsv")
    job += f"{key} {len(str(value))}\n{value}\n"   # a later record overrides the first
    proc = subprocess.run([str(build_runner(log=lambda line: None))], input=job, text=True,
                          capture_output=True, check=False, timeout=120)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(lines) == 1, (proc.returncode, lines)
    assert lines[0].startswith(f"error: job record '{key}'") and "must be a whole number" in \
        lines[0], lines
    assert not (tmp_path / "s.tsv").exists()


@pytest.mark.parametrize("args,label", [
    (["predict", "{p}", "-i", "/dev/zero"], "--input /dev/zero"),
    (["train", "predictor", "--data", "scan/jump", "--augment", "/dev/zero", "-o", "{tmp}/p.pt"],
     "--augment /dev/zero"),
    (["lm", "eval", "--base", "/dev/zero", "--val", "lm/kin", "--test", "lm/kin"],
     "--base /dev/zero"),
    (["lm", "train", "/dev/zero", "-o", "{tmp}/m.arpa"], "/dev/zero"),
    (["sample", str(SHIPPED), "--n", "2", "--lm", "/dev/zero", "-o", "{tmp}/s.tsv"],
     "--lm /dev/zero"),
    (["export", "/dev/zero", "-o", "{tmp}/exp"], "/dev/zero"),
    (["inspect", "/dev/zero"], "/dev/zero"),
    (["augment", "stem-corrupt", "/dev/zero", "-o", "{tmp}/c.tsv"], "/dev/zero"),
])
def test_a_device_given_as_a_file_is_named_as_one(tiny, tmp_path, capsys, monkeypatch, args,
                                                  label):
    """/dev/zero exists: "no such file" (or "out of memory") misled."""
    from tests.cli_in_process import assert_one_error, run

    predictor = tmp_path / "p0.pt"
    if "{p}" in args:
        compgen.train_predictor(tiny / "d.tsv", predictor, epochs=1,
                                overrides={"model.hidden": 16, "model.embed": 8})
    args = [a.format(p=predictor, tmp=tmp_path) for a in args]
    assert_one_error(run(capsys, monkeypatch, *args),
                     f"{label}: not a regular file (a FIFO, socket or device)")


@pytest.mark.parametrize("backend", ["onnx", "cpp", "torch"])
def test_a_bad_id_in_a_cut_file_names_that_file_and_line(tiny, tmp_path, backend):
    """The tuples of a length cut live in their own file: an id outside the vocabulary
    there was blamed on prototypes.txt."""
    from compgen.runtimes.artifact import sha256
    from compgen.runtimes.manifest_file import read_manifest_json, write_manifest_json

    folder = tmp_path / "export"
    if not (tiny / "export").is_dir():
        code, lines = compgen_cli("export", tiny / "g.pt", "--no-cpp", "-o", tiny / "export")
        assert code == 0, lines
    shutil.copytree(tiny / "export", folder)
    manifest = read_manifest_json(folder)   # the JSON as written, edited as a planted file
    cut = manifest["decoding"]["prototype_cuts"]["none"]["file"]
    lines = (folder / cut).read_text().splitlines()
    lines[1] = lines[1].replace(lines[1].split()[0], "999", 1)
    (folder / cut).write_text("\n".join(lines) + "\n")
    manifest["files"][cut] = sha256(folder / cut)
    write_manifest_json(folder, manifest)
    one_error(compgen_cli("sample", folder, "--backend", backend, "--prototype-cut", "none",
                          "--n", "2", "-o", tmp_path / "s.tsv"),
              f"{folder / cut}:2: token id 999 outside the vocabulary")
    assert not (tmp_path / "s.tsv").exists()


def test_a_diverging_run_writes_no_nonfinite_weights(tiny, tmp_path):
    """A learning rate of 1e30 is finite and positive, but the run diverges: it stops with
    one error instead of writing NaN weights as a finished checkpoint."""
    out = tmp_path / "g.pt"
    one_error(compgen_cli("train", "generator", "--data", tiny / "d.tsv", "--hidden", "16",
                          "--embed", "8", "--attdim", "8", "--epochs", "3", "--lr", "1e30",
                          "--quiet", "-o", out), "training diverged by step", "--lr 1e+30")
    if out.exists():   # the last checkpoint written before the divergence, finite
        assert all(torch.isfinite(t).all() for t in load_file(str(out)).values()
                   if t.is_floating_point())
