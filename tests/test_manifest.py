"""The typed manifest: read once and checked field by field, written from the same type,
and read back equal to what was written."""

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from compgen.errors import UserError
from compgen.runtimes.artifact import load_manifest
from compgen.runtimes.manifest import Manifest, PrototypeCut
from compgen.runtimes.manifest_file import (
    MANIFEST_DIGEST,
    manifest_digest,
    write_manifest,
    write_manifest_json,
)

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"


def shipped_document() -> dict:
    return json.loads((SHIPPED / "manifest.json").read_text(encoding="utf-8"))


def test_the_shipped_manifest_reads_back_as_it_is_written():
    document = shipped_document()
    manifest = load_manifest(SHIPPED)
    assert manifest.to_json() == document
    assert manifest.digest == document[MANIFEST_DIGEST] == manifest_digest(manifest.to_json())
    # what the runtimes read, typed
    assert (manifest.kind, manifest.nproto, manifest.hidden) == ("recombine", 2, 256)
    assert manifest.vocab_size == len(json.loads((SHIPPED / "vocab.json").read_text())["tokens"])
    assert manifest.max_len == document["decoding"]["max_len"] > 0
    assert manifest.prototypes == document["decoding"]["prototypes"]
    assert manifest.contract().max_len == manifest.max_len
    assert set(manifest.files) == set(document["files"])


def test_a_written_manifest_is_read_back_equal(tmp_path):
    folder = tmp_path / "export"
    shutil.copytree(SHIPPED, folder)
    edited = replace(load_manifest(folder), card_text="# edited\n\nA card of its own.\n",
                     other={"note": "a field of another version"})
    written = write_manifest(folder, edited)
    assert written.digest != edited.digest
    assert load_manifest(folder) == written == replace(edited, digest=written.digest)
    # the file holds the fields in the order an export writes them, its checksum last
    keys = list(json.loads((folder / "manifest.json").read_text(encoding="utf-8")))
    assert keys[:4] == ["format", "kind", "source_checkpoint", "config"]
    assert keys[-2:] == ["note", MANIFEST_DIGEST]


def test_a_cut_names_its_own_tuple_file():
    manifest = load_manifest(SHIPPED)
    cut = PrototypeCut("prototypes.none.txt", 7, 9)
    chosen = manifest.for_cut(cut)
    assert (chosen.prototype_file, chosen.prototypes, chosen.prototype_width) == (
        "prototypes.none.txt", 7, 9)
    assert manifest.prototype_file == "prototypes.txt"   # the manifest read is unchanged


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["decoding"].update(max_len="20"), r"decoding\.max_len = '20', expected an integer"),
    (lambda d: d["model"].update(vae=1), r"model\.vae = 1, expected true or false"),
    (lambda d: d["model"].pop("vocab_size"), r"model\.vocab_size = None, expected an integer"),
    (lambda d: d.update(kind=3), r"kind = 3, expected a string"),
    (lambda d: d.update(card={"text": 5}), r"card\.text = 5, expected a string"),
    (lambda d: d.update(load_check=[]), r"load_check = \[\], expected a JSON object"),
    (lambda d: d["decoding"].update(prototype_cuts={"none": {"file": "prototypes.none.txt",
                                                             "prototypes": -1,
                                                             "prototype_width": 3}}),
     r"decoding\.prototype_cuts\.none\.prototypes = -1, expected an integer in 0\.\.10,000,000"),
])
def test_an_invalid_field_is_one_error_naming_the_file_and_the_field(tmp_path, edit, message):
    folder = tmp_path / "export"
    shutil.copytree(SHIPPED, folder)
    document = shipped_document()
    edit(document)
    write_manifest_json(folder, document)   # sealed again: the field check must catch it
    with pytest.raises(UserError, match=message) as caught:
        load_manifest(folder)
    text = str(caught.value)
    assert text.startswith(f"{folder / 'manifest.json'}: ") and "\n" not in text


def test_a_new_manifest_writes_only_the_fields_it_has():
    manifest = Manifest(kind="seq2seq", config={}, model={"vocab_size": 9},
                        decoding={"max_len": 4})
    assert manifest.to_json() == {"format": "compgen-export-1", "kind": "seq2seq", "config": {},
                                  "model": {"vocab_size": 9}, "decoding": {"max_len": 4}}
    assert Manifest.from_json(manifest.to_json(), Path("manifest.json")) == manifest
