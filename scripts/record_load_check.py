"""Add the greedy rows of the load check (``load_check``, compgen/runtimes/recorded_outputs.py) to
the manifest of an export folder made before exports recorded them, after checking that
its files match their checksums and that model.ts and the ONNX graphs agree. Only the
manifest changes (sealed again with its own checksum; it is not among the checksummed
files); samples stay byte-identical.

    .venv/bin/python scripts/record_load_check.py exported/scan-jump-recomb2
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from compgen.runtimes.artifact import load_manifest
from compgen.runtimes.backend_check import _agree
from compgen.runtimes.manifest_file import write_manifest
from compgen.runtimes.recorded_outputs import as_manifest, greedy_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--force", action="store_true", help="replace a recorded load_check")
    args = parser.parse_args()
    manifest = load_manifest(args.folder)
    if manifest.kind != "recombine":
        raise SystemExit(f"{args.folder}: not a generator export")
    if manifest.load_check is not None and not args.force:
        raise SystemExit(f"{args.folder}: load_check recorded already (--force replaces it)")
    rows = greedy_rows(args.folder, manifest)
    _agree(args.folder, rows["torchscript"], rows["onnx"])
    manifest = write_manifest(args.folder, replace(manifest, load_check=as_manifest(rows)))
    print(json.dumps(manifest.load_check))


if __name__ == "__main__":
    main()
