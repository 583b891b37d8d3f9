"""An export's ``manifest.json`` as read and written: a JSON object with a checksum of its
own. The one place the file's JSON is handled; everything else holds a ``Manifest``."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from pathlib import Path

from compgen.errors import UserError, read_text
from compgen.io import atomic_open
from compgen.runtimes.manifest import MANIFEST_DIGEST, Manifest

__all__ = ["MANIFEST_DIGEST", "manifest_digest", "read_manifest_json", "write_manifest",
           "write_manifest_json"]


def manifest_digest(document: dict) -> str:
    """sha256 of the manifest's JSON object but its own checksum, as canonical JSON (sorted
    keys, ASCII), so a manifest edited by hand (a cut's file redirected) is refused."""
    body = {key: value for key, value in document.items() if key != MANIFEST_DIGEST}
    text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def write_manifest_json(folder: Path, document: dict) -> str:
    """``manifest.json`` holding ``document`` and its checksum, atomically; returns the
    checksum."""
    digest = manifest_digest(document)
    with atomic_open(Path(folder) / "manifest.json", "w", encoding="utf-8") as out:
        out.write(json.dumps({**document, MANIFEST_DIGEST: digest}, indent=2))
    return digest


def write_manifest(folder: Path, manifest: Manifest) -> Manifest:
    """``manifest.json`` of ``manifest``, sealed with its own checksum; returns the
    manifest as written (checksum included)."""
    document = manifest.to_json()
    document.pop(MANIFEST_DIGEST, None)
    return replace(manifest, digest=write_manifest_json(folder, document))


def read_manifest_json(folder) -> dict:
    """The manifest of an export folder as a JSON object (not yet checked further)."""
    folder = Path(folder)
    path = folder / "manifest.json"
    if not path.is_file():
        raise UserError(f"{folder}: not an export folder (no manifest.json)")
    try:
        document = json.loads(read_text(path))
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(document, dict):
        raise UserError(f"{path}: not a JSON object")
    return document
