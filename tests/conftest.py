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
