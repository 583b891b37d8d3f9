"""An export folder's ``manifest.json`` as one typed value: ``Manifest``.

Built once where the file is read (``Manifest.from_json``: every field the runtimes read
checked, an invalid one is one error naming manifest.json and the field) or by the export
kind that writes it, and turned back into JSON by ``to_json`` (``manifest_file`` seals and
writes it). The sections whose layout is the model's (``model``, ``decoding``, ``graphs``,
``config``) are kept as written; what the code reads of them are typed properties.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from compgen.decoding.contract import Contract, StepRules
from compgen.errors import UserError

FORMAT = "compgen-export-1"
MANIFEST_DIGEST = "manifest_sha256"   # the manifest's checksum of itself (``manifest_file``)
MAX_DECODE_LEN = 10_000   # no SCAN, SIGMORPHON or COGS output comes near this many tokens
PROTOTYPE_FILE = "prototypes.txt"   # a generator's tuples of its preset's length cut of Omega
CUT_FILE = re.compile(r"prototypes\.(mean|mean\+std|none)\.txt")   # of the other cuts

# the fields in the order an export writes them (``to_json``)
_WRITTEN = ("format", "kind", "source_checkpoint", "config", "lang", "model", "opset", "graphs",
            "decoding", "training_pairs", "load_check", "card", "parity", "files",
            "export_seconds")


def cut_file(cut: str) -> str:
    return f"prototypes.{cut}.txt"


@dataclass(frozen=True)
class PrototypeCut:
    """One length cut's stored tuples (``decoding.prototype_cuts.CUT``)."""

    file: str
    prototypes: int
    prototype_width: int


@dataclass(frozen=True)
class Manifest:
    kind: str                 # "recombine" (generator), "seq2seq" (predictor), "inflection"
    config: dict              # the checkpoint's configuration, as written
    model: dict               # the network's sizes, as written (``vocab_size`` in every kind)
    decoding: dict            # the decoding contract, as written
    source_checkpoint: str | None = None
    format: str = FORMAT
    lang: str | None = None   # inflection models: the language
    opset: int | None = None
    graphs: dict | None = None             # inputs and outputs of each ONNX graph
    training_pairs: str | None = None      # generators: the file of the training pairs
    load_check: dict | None = None         # generators: greedy rows recorded at export
    card_text: str | None = None           # the model card's own text
    parity: dict | None = None             # figures of the export's parity check
    files: dict[str, str] = field(default_factory=dict)   # file name -> sha256
    export_seconds: float | None = None
    digest: str | None = None              # the checksum of the rest (``MANIFEST_DIGEST``)
    other: dict = field(default_factory=dict)   # fields no runtime reads, kept as they were

    # what the runtimes read of the sections, checked by ``from_json``

    @property
    def vocab_size(self) -> int:
        return self.model["vocab_size"]

    @property
    def hidden(self) -> int:
        return self.model["hidden"]

    @property
    def latent(self) -> int:
        return self.model["latent"]

    @property
    def nproto(self) -> int:
        return self.model.get("nproto", 0)

    @property
    def variant(self) -> str | None:
        return self.model.get("variant")

    @property
    def max_len(self) -> int:
        return self.decoding["max_len"]

    @property
    def prototypes(self) -> int:
        return self.decoding.get("prototypes", 0)

    @property
    def prototype_width(self) -> int:
        return self.decoding.get("prototype_width", 0)

    @property
    def prototype_file(self) -> str:
        """The tuple file a job reads (``for_cut``; ``prototypes.txt`` before)."""
        return self.decoding.get("prototype_file", PROTOTYPE_FILE)

    @property
    def prototype_cuts(self) -> dict[str, PrototypeCut]:
        return {cut: PrototypeCut(entry["file"], entry["prototypes"], entry["prototype_width"])
                for cut, entry in self.decoding.get("prototype_cuts", {}).items()}

    def contract(self) -> Contract:
        """A generator's decoding contract (an error for one that predates it)."""
        return Contract.from_manifest(self.decoding)

    def step_rules(self) -> StepRules:
        """A predictor's step rules (its decoding contract)."""
        dec = self.decoding
        return StepRules(self.vocab_size, dec["bos"], dec["eos"], dec["pad"],
                         first_step_masked=tuple(dec["first_step_masked"]),
                         later_steps_masked=tuple(dec["later_steps_masked"]),
                         masked_value=dec["mask_value"])

    def for_cut(self, cut: PrototypeCut) -> Manifest:
        """The manifest as a job sampling one length cut's tuples reads it: its decoding
        names that cut's file, how many tuples it holds and their width."""
        return replace(self, decoding={**self.decoding, "prototype_file": cut.file,
                                       "prototypes": cut.prototypes,
                                       "prototype_width": cut.prototype_width})

    def to_json(self) -> dict:
        """The JSON object ``manifest.json`` holds (``from_json`` reads it back equal)."""
        fields = {"format": self.format, "kind": self.kind,
                  "source_checkpoint": self.source_checkpoint, "config": self.config,
                  "lang": self.lang, "model": self.model, "opset": self.opset,
                  "graphs": self.graphs, "decoding": self.decoding,
                  "training_pairs": self.training_pairs, "load_check": self.load_check,
                  "card": None if self.card_text is None else {"text": self.card_text},
                  "parity": self.parity, "files": self.files or None,
                  "export_seconds": self.export_seconds}
        out = {name: value for name, value in fields.items() if value is not None}
        out.update(self.other)
        if self.digest is not None:
            out[MANIFEST_DIGEST] = self.digest
        return out

    @classmethod
    def from_json(cls, document: dict, path: Path) -> Manifest:
        """The manifest of the JSON object read from ``path``, every field the runtimes
        read checked (a UserError naming ``path`` and the field)."""
        check = _Checker(document, path)
        kind = check.typed("kind", str, default="recombine")
        model, decoding = check.typed("model", dict), check.typed("decoding", dict)
        config = check.typed("config", dict, default={})
        check.integer("model.vocab_size", 7, 10_000_000)
        if kind in ("recombine", "seq2seq"):
            check.integer("decoding.max_len", 1, MAX_DECODE_LEN)
        if kind == "recombine":
            _check_generator(check, model, config)
        card = check.typed("card", dict, default=None)
        if card is not None and not isinstance(card.get("text"), str):
            check.fail("card.text", card.get("text"), "a string")
        files = check.typed("files", dict, default={})
        return cls(
            kind=kind, config=config, model=model, decoding=decoding,
            source_checkpoint=check.typed("source_checkpoint", str, default=None),
            format=check.typed("format", str), lang=check.typed("lang", str, default=None),
            opset=check.typed("opset", int, default=None),
            graphs=check.typed("graphs", dict, default=None),
            training_pairs=check.typed("training_pairs", str, default=None),
            load_check=check.typed("load_check", dict, default=None),
            card_text=None if card is None else card["text"],
            parity=check.typed("parity", dict, default=None), files=files,
            export_seconds=check.typed("export_seconds", (int, float), default=None),
            digest=check.typed(MANIFEST_DIGEST, str, default=None),
            other={k: v for k, v in document.items() if k not in _WRITTEN and k != MANIFEST_DIGEST})


def _check_generator(check: _Checker, model: dict, config: dict) -> None:
    check.integer("model.nproto", 0, 2)
    check.integer("decoding.prototypes", 0, 10_000_000)
    for name in ("hidden", "feed_dim", "latent"):
        check.integer(f"model.{name}", 0, 1_000_000)
    check.typed("model.vae", bool)
    check.typed("model.max_norm", (int, float))
    if model.get("variant") not in ("scan", "sig"):
        raise UserError(f"{check.path}: model.variant = {model.get('variant')!r}, "
                        "expected 'scan' or 'sig'")
    if not isinstance(config.get("data"), str) or not isinstance(config.get("model"), dict) \
            or not isinstance(config.get("sample", {}), dict):
        raise UserError(f"{check.path}: 'config' must hold the generator's data name and "
                        "[model] table")
    cuts = check.typed("decoding.prototype_cuts", dict, default={})
    for cut in cuts:
        name = f"decoding.prototype_cuts.{cut}"
        check.typed(name, dict)
        check.typed(f"{name}.file", str)
        check.integer(f"{name}.prototypes", 0, 10_000_000)
        check.integer(f"{name}.prototype_width", 0, MAX_DECODE_LEN)


_MISSING = object()


class _Checker:
    """Field checks of one JSON object, by dotted name (``decoding.max_len``)."""

    def __init__(self, document: dict, path: Path):
        self.document, self.path = document, path

    def value(self, name: str):
        value = self.document
        for part in name.split("."):
            if not isinstance(value, dict) or part not in value:
                return _MISSING
            value = value[part]
        return value

    def fail(self, name: str, value, expected: str):
        shown = None if value is _MISSING else value
        raise UserError(f"{self.path}: {name} = {shown!r}, expected {expected}")

    def typed(self, name: str, kind, *, default=_MISSING):
        value = self.value(name)
        if value is _MISSING and default is not _MISSING:
            return default
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            self.fail(name, value, _described(kind))
        return value

    def integer(self, name: str, low: int, high: int) -> int:
        value = self.value(name)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            self.fail(name, value, f"an integer in {low}..{high:,}")
        return value


def _described(kind) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string",
             dict: "a JSON object"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)
