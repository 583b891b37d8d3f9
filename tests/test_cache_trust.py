"""The user's cache is a verified store: a file planted or edited in it (one per kind:
the C++ runner, the bf16 compiled libraries, optimised ONNX graphs, passed-check records,
the compiled training loops) is never loaded or executed; it is removed, with a notice,
and built again. And the export's load check covers the weights."""

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from compgen.errors import UserError
from compgen.runtimes.artifact import load_manifest, sha256
from compgen.runtimes.manifest import Manifest
from compgen.runtimes.manifest_file import write_manifest_json
from compgen.system import cache

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"
CC, TOOLS_PATH = shutil.which("cc") or "cc", os.environ.get("PATH", "")   # before a test empties PATH


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "compgen"


@pytest.fixture
def no_compiler(tmp_path, monkeypatch):
    """A PATH with no compiler, cmake or ninja: a rebuild fails instead of running minutes
    (what is under test is that the planted file is never used)."""
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    return empty


def planted_library(path: Path, marker: Path) -> None:
    """A shared library whose constructor creates ``marker`` when it is loaded."""
    path.parent.mkdir(parents=True, exist_ok=True)
    source = path.with_suffix(".c")
    source.write_text('#include <stdio.h>\n__attribute__((constructor)) static void f(void) '
                      f'{{ FILE* m = fopen("{marker}", "w"); if (m) fclose(m); }}\n')
    subprocess.run([CC, "-shared", "-fPIC", "-o", str(path), str(source)], check=True,
                   env={**os.environ, "PATH": TOOLS_PATH})
    source.unlink()


def planted_script(path: Path, marker: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\ntouch {marker}\n")
    path.chmod(0o755)


def test_the_store_is_private_and_a_mismatch_is_removed_with_a_notice(private_cache, capsys):
    folder = cache.store("things")
    assert stat.S_IMODE(private_cache.stat().st_mode) == 0o700
    entry = folder / "entry"
    built = []
    cache.ensure(entry, "a thing", lambda: (built.append(1), entry.write_text("good")))
    assert cache.ensure(entry, "a thing", lambda: built.append(2)) == entry and built == [1]
    entry.write_text("evil")   # edited after it was recorded
    cache.ensure(entry, "a thing", lambda: (built.append(3), entry.write_text("good")))
    assert built == [1, 3] and entry.read_text() == "good"
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "a thing" in notes[0] and "building it again" in notes[0]


def test_a_killed_builder_leaves_no_lock_that_blocks(private_cache, tmp_path):
    entry = cache.store("things") / "entry"
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from compgen.system import cache\n"
        "with cache.build_lock(__import__('pathlib').Path(sys.argv[2])):\n"
        "    print('held', flush=True); time.sleep(60)"), str(ROOT), str(entry)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    cache.ensure(entry, "a thing", lambda: entry.write_text("built"))   # does not hang
    assert entry.read_text() == "built"


def test_builds_take_turns_and_leave_no_lock_file(private_cache, tmp_path):
    """Each holder removes the lock file when done; a waiter that won the lock of a file
    removed meanwhile locks the current one, so two builds never overlap."""
    entry = cache.store("things") / "entry"
    journal = tmp_path / "journal"
    code = ("import sys, time; sys.path.insert(0, sys.argv[1]); from pathlib import Path\n"
            "from compgen.system import cache\n"
            "for _ in range(5):\n"
            "    with cache.build_lock(Path(sys.argv[2])):\n"
            "        with open(sys.argv[3], 'a') as j: j.write('in\\n')\n"
            "        time.sleep(0.02)\n"
            "        with open(sys.argv[3], 'a') as j: j.write('out\\n')\n")
    holders = [subprocess.Popen([sys.executable, "-c", code, str(ROOT), str(entry), str(journal)])
               for _ in range(3)]
    assert [h.wait(timeout=120) for h in holders] == [0, 0, 0]
    assert journal.read_text().split() == ["in", "out"] * 15
    assert not list(entry.parent.iterdir())


def test_a_planted_runner_is_never_executed(private_cache, no_compiler, tmp_path):
    from compgen.runtimes.cpp import _source_key

    marker = tmp_path / "runner-ran"
    folder = private_cache / "cpp_runner" / _source_key()
    planted_script(folder / "compgen-sample", marker)
    (folder.parent / (folder.name + cache.RECORD_SUFFIX)).write_text('{"sha256": "0" }')
    result = subprocess.run(
        [sys.executable, "-m", "compgen", "sample", str(SHIPPED), "--backend", "cpp", "--n", "2",
         "-o", str(tmp_path / "s.tsv")], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, check=False)
    assert not marker.exists()
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert any(line.startswith("note: the C++ runner in the cache") for line in lines)
    assert lines[-1].startswith("error: 'cmake' not found")
    assert not folder.exists() and not (tmp_path / "s.tsv").exists()


def test_a_planted_compiled_library_is_never_loaded(private_cache, no_compiler, tmp_path):
    from compgen.runtimes import reduced

    marker = tmp_path / "library-loaded"
    manifest = load_manifest(SHIPPED)
    code = sorted((ROOT / "compgen" / "models").glob("*.py"))
    code += [ROOT / "compgen" / "runtimes" / name for name in ("inductor.py", "graphs.py")]
    target = private_cache / "reduced" / (
        reduced._key(SHIPPED / "model.ts", *code, version=reduced._torch_version()) + "-bf16-aoti")
    planted_library(target / "step.so", marker)
    with pytest.raises(UserError):   # rebuilt, and the rebuild needs a compiler
        reduced.bf16_libraries(SHIPPED, manifest)
    assert not marker.exists() and not (target / "step.so").exists()


def test_an_edited_optimised_graph_is_never_loaded(private_cache, capsys):
    import onnxruntime as ort

    from compgen.runtimes.onnx import _optimised_path, open_session

    graph = SHIPPED / "prototypes.onnx"
    seqs = np.array([[8, 9, 10, 2]], dtype=np.int64)
    reference = ort.InferenceSession(str(graph)).run(None, {"seqs": seqs})
    open_session(graph, 1)   # builds and records the optimised copy
    optimised = _optimised_path(graph)
    assert cache.recorded(optimised) is not None
    # a graph that loads and runs, with other outputs: the encoder's step of another model
    import onnx

    model = onnx.load(str(optimised))
    init = model.graph.initializer[0]
    values = onnx.numpy_helper.to_array(init).copy()
    model.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(values * 1.5, init.name))
    onnx.save(model, str(optimised))
    capsys.readouterr()
    session = open_session(graph, 1)
    assert "optimised ONNX graph" in capsys.readouterr().err
    outputs = session.run(None, {"seqs": seqs})
    for got, want in zip(outputs, reference):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_planted_native_loops_are_never_loaded(private_cache, no_compiler, tmp_path, monkeypatch):
    from compgen.models import native

    marker = tmp_path / "loops-loaded"
    key = native._key()
    planted_library(private_cache / "native" / key / f"compgen_native_{key}.so", marker)
    monkeypatch.setenv("COMPGEN_NATIVE", "1")
    monkeypatch.setattr(native, "_loaded", {})
    assert native.loops() is None    # rebuilt, and the rebuild needs a compiler
    assert not marker.exists()


def noisy_copy(tmp_path: Path) -> Path:
    """The shipped export with 5 % noise added to one weight of model.ts, the manifest's
    checksums redone (what anyone who can write the folder can do)."""
    folder = tmp_path / "noisy"
    shutil.copytree(SHIPPED, folder)
    module = torch.jit.load(str(folder / "model.ts"))
    weight = next(p for n, p in module.named_parameters()
                  if n.endswith("weight") and p.dim() == 2)
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        weight.mul_(1 + 0.05 * torch.randn(weight.shape, generator=generator))
    module.save(str(folder / "model.ts"))
    manifest = json.loads((folder / "manifest.json").read_text())
    manifest["files"]["model.ts"] = sha256(folder / "model.ts")
    write_manifest_json(folder, manifest)
    return folder


def test_noisy_weights_with_a_rehashed_manifest_are_refused_despite_a_planted_record(
        private_cache, tmp_path):
    from compgen.runtimes.backend_check import check_generator_backends, passed_record

    folder = noisy_copy(tmp_path)
    manifest = load_manifest(folder)   # the checksums hold
    record = passed_record(manifest)
    record.parent.mkdir(parents=True, exist_ok=True)
    record.touch()   # an empty "passed" record planted in the cache
    with pytest.raises(UserError, match="model.ts|torchscript"):
        check_generator_backends(folder, manifest)
    check_generator_backends(SHIPPED, load_manifest(SHIPPED))   # the shipped one loads
    assert cache.recorded(passed_record(load_manifest(SHIPPED))) is not None


def test_a_checkpoint_of_non_finite_weights_is_not_exported(tmp_path):
    from compgen.runtimes.recorded_outputs import finite_weights

    model = torch.nn.Linear(3, 2)
    finite_weights(model, "ok.pt")
    with torch.no_grad():
        model.weight[0, 0] = float("nan")
    with pytest.raises(UserError, match="weight weight holds NaN"):
        finite_weights(model, "nan.pt")


def test_the_runner_is_handed_a_checked_private_copy(tmp_path):
    """What the C++ runner loads is a copy checked as it was made: a file swapped in the
    export folder afterwards is not what runs; one changed before is refused."""
    from compgen.runtimes.artifact import checked_private_copy

    folder = tmp_path / "export"
    shutil.copytree(SHIPPED, folder)
    manifest = load_manifest(folder)
    with checked_private_copy(folder, manifest) as copy:
        assert stat.S_IMODE(copy.stat().st_mode) == 0o700
        assert not list(copy.glob("*.onnx"))
        (folder / "model.ts").write_bytes(b"planted")   # swapped after the check
        assert sha256(copy / "model.ts") == manifest.files["model.ts"]
        assert sha256(copy / "train.tsv") == manifest.files["train.tsv"]
    assert not copy.exists()
    with pytest.raises(UserError, match="model.ts: checksum does not match the manifest"), \
            checked_private_copy(folder, manifest):
        pass
    assert not list(copy.parent.glob(copy.name.rsplit(".", 1)[0] + ".*"))


def test_a_cached_entry_changed_after_its_check_is_not_handed_over(private_cache, tmp_path):
    from compgen.runtimes.artifact import checked_private_copy

    entry = cache.store("things") / "libs"
    cache.ensure(entry, "libs", lambda: (entry.mkdir(), (entry / "a.so").write_bytes(b"good")))
    manifest = Manifest(kind="recombine", config={}, model={}, decoding={})   # no files
    with checked_private_copy(tmp_path, manifest, [entry]) as copy:
        assert (copy / "libs" / "a.so").read_bytes() == b"good"
    (entry / "a.so").write_bytes(b"evil")
    with pytest.raises(UserError, match="does not match its record"), \
            checked_private_copy(tmp_path, manifest, [entry]):
        pass


def test_an_edited_manifest_is_refused(tmp_path):
    """The manifest carries a checksum of its own: a hand edit (a cut's file name pointed at
    another file the folder holds) is refused, not sampled from."""
    folder = tmp_path / "export"
    shutil.copytree(SHIPPED, folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    manifest["decoding"]["prototype_file"] = "train.tsv"
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    with pytest.raises(UserError, match="manifest.json: does not match its own checksum"):
        load_manifest(folder)


def test_a_manifest_from_before_its_checksum_is_exported_again_not_sampled(tmp_path):
    from compgen.runtimes.manifest_file import MANIFEST_DIGEST

    folder = tmp_path / "export"
    shutil.copytree(SHIPPED, folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    del manifest[MANIFEST_DIGEST]
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    with pytest.raises(UserError, match="no checksum of its own .* export it again"):
        load_manifest(folder)
    assert load_manifest(folder, older_ok=True).files == manifest["files"]
