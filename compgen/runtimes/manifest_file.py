"""An export's ``manifest.json`` as written: with a checksum of its own."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from compgen.io import atomic_open

# the manifest's own checksum, kept in it: sha256 of the rest of the manifest as canonical
# JSON (sorted keys, ASCII), so a manifest edited by hand (a cut's file redirected) is refused
MANIFEST_DIGEST = "manifest_sha256"


def manifest_digest(manifest: dict) -> str:
    body = {key: value for key, value in manifest.items() if key != MANIFEST_DIGEST}
    text = json.dumps(body, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def write_manifest(folder: Path, manifest: dict) -> None:
    """``manifest.json`` with its own checksum, atomically (the caller's dict gets it too)."""
    manifest[MANIFEST_DIGEST] = manifest_digest(manifest)
    with atomic_open(Path(folder) / "manifest.json", "w", encoding="utf-8") as out:
        out.write(json.dumps(manifest, indent=2))
