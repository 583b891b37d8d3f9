"""Tests read the real data sets: $COMPGEN_TEST_DATA, else ../shared/data, else the folder
`compgen data fetch` fills (~/.cache/compgen/data).

Without any of them (a fresh clone), the tests run on the copies embedded in the package
(SCAN jump and around_right, SCAN tasks.txt, the kin LM corpus); a test that fails because a
file of the full corpora is missing is reported as skipped, all under one summary line (so is
one missing from a partial data folder, e.g. after `compgen data fetch scan` alone).
COMPGEN_REQUIRE_DATA=1 (set by .ci/run) turns every skip into a failure."""

import atexit
import gzip
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _find_data() -> Path | None:
    from compgen.data.sources import default_data_dir

    if os.environ.get("COMPGEN_TEST_DATA"):
        candidates = [Path(os.environ["COMPGEN_TEST_DATA"])]
    else:
        # the user's cache counts once a corpus was fetched into it: `lm experiment kin`
        # also writes the embedded kin corpus there, which is not a data folder
        fetched = default_data_dir()
        candidates = [ROOT.parent / "shared" / "data"] + ([fetched] if (fetched / "scan").is_dir() else [])
    return next((path for path in candidates if path.is_dir()), None)


# embedded file -> where the data folder keeps it
EMBEDDED_LAYOUT = {
    "tasks.txt": "scan/tasks.txt",
    "tasks_train_addprim_jump.txt": "scan/add_prim_split/tasks_train_addprim_jump.txt",
    "tasks_test_addprim_jump.txt": "scan/add_prim_split/tasks_test_addprim_jump.txt",
    "tasks_train_template_around_right.txt":
        "scan/template_split/tasks_train_template_around_right.txt",
    "tasks_test_template_around_right.txt":
        "scan/template_split/tasks_test_template_around_right.txt",
    "kin_train.txt": "lm/kin/train.txt",
    "kin_val.txt": "lm/kin/val.txt",
    "kin_test.txt": "lm/kin/test.txt",
}


def _embedded_data_folder() -> Path:
    """A data folder holding only the files embedded in the package (removed when the test
    session's process exits)."""
    root = Path(tempfile.mkdtemp(prefix="compgen-test-data-"))
    atexit.register(shutil.rmtree, root, True)
    embedded = resources.files("compgen.data").joinpath("embedded")
    for name, relpath in EMBEDDED_LAYOUT.items():
        target = root / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(gzip.decompress(embedded.joinpath(name + ".gz").read_bytes()))
    return root


FOUND_DATA = _find_data()
HAVE_DATA = FOUND_DATA is not None
SHARED_DATA = FOUND_DATA if HAVE_DATA else _embedded_data_folder()
# the reference outputs sit beside the data folder; without one, a path inside the
# embedded-only folder, so a test reading them is skipped like any other corpus test
REFERENCE = (SHARED_DATA.parent if HAVE_DATA else SHARED_DATA) / "reference"
os.environ["COMPGEN_DATA"] = str(SHARED_DATA)
NEEDS_CORPORA = ("needs the full corpora: run 'compgen data fetch scan' (and sigmorphon, lm, "
                 "cogs, geoquery), or set COMPGEN_TEST_DATA to a data folder")


MISSING_FILE = ("no such file", "missing;", "no such folder")


def _mentions_missing_data(exc: BaseException | None) -> bool:
    """The exception (or one it was raised from) is about a file of the data folder that is not
    there. With only the embedded copies any mention of that folder counts; with a data folder
    (possibly a partial one, e.g. only `compgen data fetch scan`) the message must say the file
    is missing, so that a real error about a data file still fails."""
    seen = 0
    while exc is not None and seen < 10:
        text = f"{exc} {getattr(exc, 'filename', '') or ''}"
        if str(SHARED_DATA) in text and (
                not HAVE_DATA or isinstance(exc, FileNotFoundError)
                or any(marker in text.lower() for marker in MISSING_FILE)):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    missing_data = (report.failed and call.excinfo is not None
                    and _mentions_missing_data(call.excinfo.value))
    data_skip = (report.skipped and isinstance(report.longrepr, tuple)
                 and NEEDS_CORPORA in report.longrepr[2])
    if missing_data or data_skip:
        report.outcome = "skipped"
        # one location and one reason: the summary groups every such skip in one line
        report.longrepr = (str(Path(__file__)), 1, f"Skipped: {NEEDS_CORPORA}")
    if report.skipped and os.environ.get("COMPGEN_REQUIRE_DATA") == "1":
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        report.outcome = "failed"
        report.longrepr = f"skipped, but COMPGEN_REQUIRE_DATA=1 forbids skips: {reason}"


def pytest_collection_modifyitems(config, items):
    """The README run (35–55 min) is opt-in: deselected unless COMPGEN_README_RUN=1."""
    if os.environ.get("COMPGEN_README_RUN") == "1":
        return
    slow = [item for item in items if item.get_closest_marker("readme_run")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item not in slow]


def pytest_configure(config):
    config.addinivalue_line("markers", "readme_run: runs every README command (opt-in)")


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return SHARED_DATA


@pytest.fixture(scope="session")
def require_data():
    """``require_data(path)`` skips the test (under the one corpora summary line) when a file
    or folder of the full data sets is absent."""
    def require(path: Path) -> Path:
        if not path.exists():
            pytest.skip(NEEDS_CORPORA)
        return path
    return require


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


@pytest.fixture(scope="session")
def kenlm_runner() -> Path:
    """The C++ runner built with KenLM's query library (compgen-sample scoring inside its
    loop, compgen-lm-score beside it); skipped where scripts/install_kenlm.sh did not run."""
    from compgen.runtimes.cpp import build_runner, kenlm_query_dir

    if not (kenlm_query_dir() / "lib" / "libkenlm.a").is_file():
        pytest.skip(f"KenLM's query library not built in {kenlm_query_dir()} "
                    "(bash scripts/install_kenlm.sh)")
    return build_runner(log=lambda m: None, kenlm=True)


@pytest.fixture
def damaged_copy(tmp_path):
    """copy(folder, name, content=None) -> a copy of an exported folder with one file changed.

    Without content, 64 bytes of the file are zeroed and the manifest's checksum goes stale;
    with content, the file is replaced and the manifest re-hashed, so only later checks can
    catch it."""
    import json
    import shutil

    from compgen.runtimes.artifact import sha256
    from compgen.runtimes.manifest_file import write_manifest_json

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
        write_manifest_json(damaged, manifest)
        return damaged

    return copy
