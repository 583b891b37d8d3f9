"""Model cards are rendered from their manifest: the shipped card is what the renderer
writes from the shipped manifest, so its figures cannot drift from the folder."""

import copy
import shutil
from dataclasses import replace
from pathlib import Path

from compgen.runtimes.artifact import load_manifest
from compgen.runtimes.card import render_card, set_card_text

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"


def test_the_shipped_card_is_rendered_from_its_manifest():
    manifest = load_manifest(SHIPPED)
    card = (SHIPPED / "README.md").read_text(encoding="utf-8")
    assert card == render_card(SHIPPED), "exported/scan-jump-recomb2/README.md is stale: " \
        "python -c \"from compgen.runtimes.card import write_card; write_card('exported/scan-jump-recomb2')\""
    assert f": {manifest.export_seconds:g} s, the parity check included" in card
    onnx = manifest.parity["backends"]["onnx"]    # 2.09e-4 abs, 6.01e-5 relative
    assert f"| onnx | identical | identical | {onnx['max_abs_logp_diff']:.2e} | ".replace(
        "e-04", "e-4") in card
    assert card.startswith("# scan-jump-recomb2: an R&R recomb-2 generator for SCAN jump\n")
    for name in manifest.files:
        assert f"| `{name}` | {(SHIPPED / name).stat().st_size:,} |" in card


def test_the_card_follows_the_manifest(tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(SHIPPED, folder)
    manifest = load_manifest(folder)
    parity = copy.deepcopy(manifest.parity)
    parity["backends"]["onnx"]["max_abs_logp_diff"] = 3.25e-5
    card = render_card(folder, replace(manifest, export_seconds=12.5, parity=parity))
    assert ": 12.5 s, the parity check included" in card and "| 3.25e-5 |" in card
    assert "79.66 s" not in card
    set_card_text(folder, "# copy: a title\n\nWhat it is.\n\n## Notes\n\nMeasured here.\n")
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert card.startswith("# copy: a title\n\nWhat it is.\n\n## Export\n")
    assert card.endswith("## Notes\n\nMeasured here.\n") and card == render_card(folder)
    load_manifest(folder)   # the card and the manifest's text keep the folder valid
    set_card_text(folder, "")
    assert render_card(folder).startswith("# generator: an R&R generator, exported\n")
