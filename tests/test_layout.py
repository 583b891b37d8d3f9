"""The package layout: no import cycles, layers one way, no module over 600 lines, no
import inside a function without a reason (scripts/import_graph.py on compgen/, and on
small packages built to break each rule)."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "import_graph.py"


def run_graph(package: Path) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, str(SCRIPT), str(package), "--json"],
                          check=False, capture_output=True, text=True, timeout=120)
    return proc.returncode, json.loads(proc.stdout)


def write_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "compgen"
    for name, text in {"__init__.py": "", **files}.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return package


def test_compgen_has_no_cycle_no_layer_violation_no_long_module():
    code, report = run_graph(ROOT / "compgen")
    assert report["cycles"] == []
    assert report["layer_violations"] == []
    assert report["unplaced_modules"] == []
    assert report["long_modules"] == {}
    # every import inside a function says why it is there (optional, start-up or cycle)
    assert report["deferred_imports_without_reason"] == []
    assert code == 0
    # the graph is real: the CLI package reaches the trainer and the export package
    assert report["modules"] > 50 and report["edges"] > report["modules"]


def test_a_cycle_through_a_lazy_import_is_found(tmp_path):
    package = write_package(tmp_path, {
        "data/__init__.py": "",
        "data/a.py": "from compgen.data import b\n",
        "data/b.py": "def f():\n    from compgen.data.a import g\n    return g\n",
    })
    code, report = run_graph(package)
    assert report["cycles"] == [["compgen.data.a", "compgen.data.b"]]
    assert code == 1


def test_an_upward_import_and_a_sibling_group_import_are_violations(tmp_path):
    package = write_package(tmp_path, {
        "models/__init__.py": "",
        "models/net.py": "from ..cli import main\n",          # models -> cli: upward
        "cli/__init__.py": "main = None\n",
        "export/__init__.py": "",
        "export/spec.py": "from compgen.sampling.options import options\n",  # sibling group
        "sampling/__init__.py": "",
        "sampling/options.py": "options = None\n",
    })
    code, report = run_graph(package)
    found = {(v["module"], v["imports"]) for v in report["layer_violations"]}
    assert found == {("compgen.models.net", "compgen.cli"),
                     ("compgen.export.spec", "compgen.sampling.options")}
    assert report["cycles"] == []
    assert code == 1


def test_a_module_lives_in_its_package_layer(tmp_path):
    """No module is placed apart from its package: a trainer that imports a module of
    evaluation/ points up, whatever that module holds."""
    package = write_package(tmp_path, {
        "training/__init__.py": "",
        "training/predictor.py": "from compgen.evaluation.metrics import score\n",
        "evaluation/__init__.py": "",
        "evaluation/metrics.py": "score = None\n",
        "system/__init__.py": "",
        "system/environment.py": "from compgen.device import resolve\n",
        "device.py": "resolve = None\n",
    })
    code, report = run_graph(package)
    found = {(v["module"], v["imports"]) for v in report["layer_violations"]}
    assert found == {("compgen.training.predictor", "compgen.evaluation.metrics"),
                     ("compgen.system.environment", "compgen.device")}
    assert code == 1


def test_a_module_over_600_lines_and_an_unplaced_module_fail(tmp_path):
    package = write_package(tmp_path, {
        "io.py": "x = 1\n" * 601,
        "errors.py": "x = 1\n" * 600,
        "newthing.py": "",
    })
    code, report = run_graph(package)
    assert report["long_modules"] == {"compgen.io": 601}
    assert report["unplaced_modules"] == ["compgen.newthing"]
    assert code == 1


def test_an_import_inside_a_function_needs_a_reason(tmp_path):
    package = write_package(tmp_path, {
        "io.py": "def f():\n    import json\n    return json\n",
        "errors.py": ("def f():\n"
                      "    # start-up: the CLI's help loads no json\n"
                      "    import json\n\n    import csv\n\n"
                      "    # no tag on this one\n    import re\n"
                      "    import ast  # optional: ast is an extra\n"
                      "    return json, csv, re, ast\n\n\n"
                      "import os  # a module-level import needs no reason\n"),
    })
    code, report = run_graph(package)
    assert report["deferred_imports_without_reason"] == [
        {"module": "compgen.errors", "line": 8, "import": "import re"},
        {"module": "compgen.io", "line": 2, "import": "import json"}]
    assert report["deferred_imports_by_reason"] == {"optional": 1, "start-up": 2, "cycle": 0}
    assert report["cycles"] == [] and report["layer_violations"] == []
    assert code == 1
    (package / "io.py").write_text("def f():\n    import json  # cycle: io <-> json\n")
    (package / "errors.py").write_text("import re\n\n\ndef f():\n    return re\n")
    code, report = run_graph(package)
    assert report["deferred_imports_without_reason"] == []
    assert code == 0
