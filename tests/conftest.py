"""Tests read the real data sets in ../shared/data (override with COMPGEN_TEST_DATA)."""

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("COMPGEN_TEST_DATA", ROOT.parent / "shared" / "data"))
REFERENCE = SHARED_DATA.parent / "reference"

if not SHARED_DATA.is_dir():
    raise RuntimeError(f"test data folder {SHARED_DATA} is missing (set COMPGEN_TEST_DATA)")
os.environ["COMPGEN_DATA"] = str(SHARED_DATA)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return SHARED_DATA


@pytest.fixture(scope="session")
def reference_dir() -> Path:
    return REFERENCE


@pytest.fixture(scope="session")
def small_scan(tmp_path_factory, data_dir) -> Path:
    """A data folder holding the first 600 lines of SCAN jump (train) and 50 test lines."""
    root = tmp_path_factory.mktemp("data")
    folder = root / "scan" / "add_prim_split"
    folder.mkdir(parents=True)
    for part, n in (("train", 600), ("test", 50)):
        name = f"tasks_{part}_addprim_jump.txt"
        lines = (data_dir / "scan" / "add_prim_split" / name).read_text().splitlines()[:n]
        (folder / name).write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="module")
def one_torch_thread():
    """Small models on a shared machine: one thread is faster and leaves cores free."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def damaged_copy(tmp_path):
    """copy(folder, name, content=None) -> a copy of an exported folder with one file changed.

    Without content, 64 bytes of the file are zeroed and the manifest's checksum goes stale;
    with content, the file is replaced and the manifest re-hashed, so only later checks can
    catch it."""
    import json
    import shutil

    from compgen.export import sha256

    def copy(folder: Path, name: str, content: bytes | None = None) -> Path:
        damaged = tmp_path / f"damaged-{len(list(tmp_path.glob('damaged-*')))}"
        shutil.copytree(folder, damaged)
        if content is None:
            with open(damaged / name, "r+b") as f:
                f.seek(100)
                f.write(b"\x00" * 64)
            return damaged
        (damaged / name).write_bytes(content)
        manifest = json.loads((damaged / "manifest.json").read_text())
        manifest["files"][name] = sha256(damaged / name)
        (damaged / "manifest.json").write_text(json.dumps(manifest))
        return damaged

    return copy
