"""What a preset, checkpoint or export folder holds, for people: ``compgen presets`` and
``compgen inspect``."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from compgen.errors import UserError, read_text

# the bundled presets, found without importing compgen.training.checkpoint (and with it torch):
# listing them takes a fraction of a second
PRESET_DIR = Path(__file__).parents[1] / "configs"

def first_sentence(comment: str) -> str:
    """The leading comment's first sentence, however many lines it spans."""
    for end in range(len(comment)):
        if comment[end] == "." and (end + 1 == len(comment) or comment[end + 1] == " "):
            return comment[:end + 1]
    return comment


def preset_table() -> list[dict]:
    """Every bundled preset (the TOML files): name, kind and the first sentence of what it
    is for."""
    rows = []
    for path in sorted(PRESET_DIR.glob("*.toml")):
        text = read_text(path)
        lines = text.splitlines()
        start = next((i for i, line in enumerate(lines) if line.startswith("#")), len(lines))
        block = []
        for line in lines[start:]:
            if not line.startswith("#"):
                break
            block.append(line.lstrip("# ").strip())
        kind = tomllib.loads(text).get("kind", "geca" if path.stem.startswith("geca") else "")
        rows.append({"name": path.stem, "kind": kind, "about": first_sentence(" ".join(block))})
    return rows


def preset_text(name: str) -> str:
    """The TOML text of a bundled preset."""
    path = PRESET_DIR / f"{name}.toml"
    if not path.is_file():
        names = sorted(p.stem for p in PRESET_DIR.glob("*.toml"))
        raise UserError(f"unknown preset '{name}' (presets: {', '.join(names)})")
    return read_text(path)


def _training_state(state: dict) -> dict:
    keep = ("step", "epoch", "batch", "done", "best_ppl", "lr", "elapsed")
    out = {k: state[k] for k in keep if k in state}
    if "state" in state:            # a predictor that can be resumed
        out.update({k: v for k, v in state["state"].items() if k != "stream"})
        out["done"] = False
    curve = state.get("curve") or []
    out["curve_points"] = len(curve)
    if curve:
        out["last_curve_point"] = curve[-1]
    return out


def describe(path: str | Path) -> dict:
    """Sections describing a checkpoint file or an export folder."""
    path = Path(path)
    if path.is_dir():
        # start-up: `compgen presets`, the other caller of this module, loads no polars
        from compgen.data.vocab import Vocab
        from compgen.runtimes.artifact import load_manifest

        manifest = load_manifest(path)
        vocab = Vocab.load(path / "vocab.json")
        parity = manifest.parity or {}
        return {
            "what": {"path": str(path), "type": "export folder", "kind": manifest.kind,
                     "from checkpoint": manifest.source_checkpoint,
                     "opset": manifest.opset, "export seconds": manifest.export_seconds},
            "config": manifest.config,
            "vocabulary": {"size": len(vocab), "tokens": " ".join(vocab.tokens[:40])},
            "parity": {k: v for k, v in parity.items() if k != "backends"}
                      | {name: figures for name, figures in parity.get("backends", {}).items()},
            "files": sorted(manifest.files),
        }
    # start-up: `compgen presets`, the other caller of this module, loads no torch
    from compgen.training.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(path)
    parameters = sum(int(t.numel()) for t in checkpoint.weights.values())
    return {
        "what": {"path": str(path), "type": "checkpoint", "kind": checkpoint.kind,
                 "data": checkpoint.config.get("data") or checkpoint.config.get("run", {}).get("data"),
                 "parameters": parameters},
        "config": checkpoint.config,
        "vocabulary": {"size": len(checkpoint.vocab), "tokens": " ".join(checkpoint.vocab.tokens[:40])},
        "training state": _training_state(checkpoint.train_state),
    }


def sections_text(sections: dict, as_json: bool = False) -> str:
    """``describe``'s sections as ``compgen inspect`` prints them: ``[title]`` and
    ``key: value`` lines, or one JSON object; non-ASCII text (a Georgian vocabulary) as
    itself, not as \\u escapes."""
    if as_json:
        return json.dumps(sections, indent=1, default=str, ensure_ascii=False) + "\n"
    lines = []
    for title, body in sections.items():
        lines.append(f"[{title}]")
        items = body.items() if isinstance(body, dict) else [("", ", ".join(map(str, body)))]
        for key, value in items:
            text = (json.dumps(value, default=str, ensure_ascii=False)
                    if isinstance(value, dict | list) else str(value))
            lines.append(f"  {key}: {text}" if key else f"  {text}")
    return "\n".join(lines) + "\n"
