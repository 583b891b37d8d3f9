"""The model card (``README.md``) of an export folder, rendered from ``manifest.json`` and
the sizes of the files it lists: the export time, the parity figures, the configuration
and the sizes it quotes are the manifest's, so the card cannot disagree with the folder.

Text that no manifest field holds (what the model is for, how it was trained, measured
sample quality) is the manifest's ``card.text``: Markdown whose title line and opening
paragraphs come first, then the generated sections, then its own ``##`` sections.
``compgen export --card FILE`` sets it; re-exporting a folder keeps it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from compgen.io import atomic_open
from compgen.runtimes.manifest import CUT_FILE, Manifest
from compgen.runtimes.manifest_file import read_manifest_json, write_manifest

CARD = "README.md"

# what each file of an export folder is, by name
FILE_ROLES = {
    "model.ts": "the graphs in TorchScript (backends `torchscript`, `cpp`); `--backend torch` "
                "rebuilds the eager model from its weights",
    "prototypes.onnx": "ONNX graph: prototype encoder (backend `onnx`)",
    "encoder.onnx": "ONNX graph: encoder (backend `onnx`)",
    "decoder_step.onnx": "ONNX graph: one decoder step (backend `onnx`)",
    "prototypes.txt": "prototype tuples of the training data, shuffled once; every backend "
                      "cycles through them",
    "train.tsv": "the training pairs: the unique / novel filters of every backend read them "
                 "(no data folder needed)",
    "vocab.json": "the vocabulary",
    "vocab.txt": "the vocabulary, one token per line (the C++ runner's)",
    "target_vocab.json": "the target vocabulary",
}

KINDS = {"recombine": "an R&R generator", "seq2seq": "a seq2seq predictor",
         "inflection": "a character inflection model"}


def _number(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    return _float(value) if isinstance(value, float) else str(value)


def _float(value: float) -> str:
    """0, 0.003, 1e-4, 2.09e-4: short, no padded exponents."""
    if value == 0 or 1e-3 <= abs(value) < 1e6:
        return f"{value:g}"
    mantissa, exponent = f"{value:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def _settings(table: dict) -> str:
    return ", ".join(f"{key} {_number(value)}" for key, value in table.items()
                     if not isinstance(value, dict | list))


def _parity(parity: dict) -> list[str]:
    checked = (f"{parity['sets']:,} prototype sets" if "sets" in parity
               else f"{parity.get('sources', 0):,} {parity.get('split', 'test')} sources")
    tolerance = parity.get("tolerance", 0.0)
    lines = [(f"Checked against the eager model on {checked} before the folder was written "
              f"(log-probabilities per step within {_float(tolerance)} × max(1, |log p|), "
              f"over tokens with log p above {_float(parity.get('logp_floor', -30.0))}):"), "",
             "| backend | greedy outputs | beam outputs | max abs. Δ log p | max rel. Δ log p |",
             "|---|---|---|---:|---:|"]
    for name, f in parity.get("backends", {}).items():
        cells = []
        for mode in ("greedy", "beam"):
            same = f.get(f"{mode}_identical")
            ties = f.get(f"{mode}_near_ties")
            cells.append("—" if same is None else ("identical" if same else "differ")
                         + (f" ({ties} near-ties)" if ties else ""))
        for key in ("max_abs_logp_diff", "max_rel_logp_diff"):
            cells.append(_float(float(f"{f[key]:.3g}")) if key in f else "—")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _files(folder: Path, manifest: Manifest) -> list[str]:
    names = sorted(manifest.files)
    sizes = {name: (folder / name).stat().st_size for name in names if (folder / name).is_file()}
    manifest_bytes = (folder / "manifest.json").stat().st_size
    total = sum(sizes.values()) + manifest_bytes
    lines = [f"{total / 1e6:.1f} MB ({total:,} bytes without this card):", "",
             "| file | bytes | what |", "|---|---:|---|"]
    prototypes = manifest.prototypes
    for name in names:
        role = FILE_ROLES.get(name, "")
        cut = CUT_FILE.fullmatch(name)
        if cut:
            role = (f"prototype tuples drawn with the {cut.group(1)} length cut "
                    f"(`--prototype-cut {cut.group(1)}`)")
        if name == "prototypes.txt" and prototypes:
            role = f"{prototypes:,} " + role
        lines.append(f"| `{name}` | {sizes.get(name, 0):,} | {role} |")
    lines.append(f"| `manifest.json` | {manifest_bytes:,} | config, decoding contract, parity "
                 "figures, sha256 of every file, this card's text |")
    return lines


def render_card(folder: str | Path, manifest: Manifest | None = None) -> str:
    """The card of ``folder`` (its manifest unless one is given), as Markdown."""
    folder = Path(folder)
    if manifest is None:
        manifest = _read(folder)
    text = (manifest.card_text or "").strip("\n")
    head, _, own = text.partition("\n## ")
    if not head.startswith("# "):   # named after its checkpoint: the folder may be staging
        name = Path(manifest.source_checkpoint or folder.name).stem
        head = f"# {name}: {KINDS.get(manifest.kind, 'a model')}, exported\n\n" + head
    config, model = manifest.config, manifest.model
    lines = [head.strip("\n"), "", "## Export", "",
             (f"`compgen export {manifest.source_checkpoint or ''}` "
              f"(format `{manifest.format}`, ONNX opset {manifest.opset}): "
              f"{manifest.export_seconds or 0:g} s, the parity check included."), ""]
    if config.get("data"):
        lines += [f"Data: `{config['data']}`.", ""]
    lines += [f"Model: {_settings(model)}.", ""]
    if isinstance(config.get("train"), dict):
        lines += [f"Training settings: {_settings(config['train'])}.", ""]
    if isinstance(config.get("sample"), dict):
        lines += [f"Sampling defaults: {_settings(config['sample'])}.", ""]
    lines += _parity(manifest.parity or {})
    lines += ["", "## Files and size", ""] + _files(folder, manifest)
    if own:
        lines += ["", "## " + own.strip("\n")]
    return "\n".join(lines) + "\n"


def write_card(folder: str | Path, manifest: Manifest | None = None) -> Path:
    """Write ``README.md`` beside the manifest (atomically)."""
    folder = Path(folder)
    with atomic_open(folder / CARD, "w", encoding="utf-8") as out:
        out.write(render_card(folder, manifest))
    return folder / CARD


def set_card_text(folder: str | Path, text: str) -> Path:
    """Store ``text`` as the manifest's ``card.text`` and write the card again."""
    folder = Path(folder)
    manifest = write_manifest(folder, replace(_read(folder), card_text=text))
    return write_card(folder, manifest)


def _read(folder: Path) -> Manifest:
    """The manifest of a folder being written or rewritten (its checksums not verified)."""
    return Manifest.from_json(read_manifest_json(folder), folder / "manifest.json")
