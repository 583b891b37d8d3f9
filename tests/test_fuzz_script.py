"""scripts/fuzz.py on a few inputs per target: every reader and loader answers with a result
or a one-line UserError, never a traceback (the full run uses --n 10000)."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_fuzzing_a_few_inputs_finds_no_traceback(tmp_path):
    spec = importlib.util.spec_from_file_location("fuzz", ROOT / "scripts" / "fuzz.py")
    fuzz = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fuzz)
    assert fuzz.main(["--n", "25", "--json", str(tmp_path / "fuzz.json")]) == 0
    figures = json.loads((tmp_path / "fuzz.json").read_text())
    assert figures["tracebacks"] == 0
    assert set(figures["targets"]) == {*fuzz.readers(tmp_path), "checkpoint loader",
                                       "export folder loader"}
    for name, target in figures["targets"].items():
        assert target["inputs"] == 25 and target["tracebacks"] == 0, name
        assert target["refused_with_error"] + target["accepted"] == 25, name
