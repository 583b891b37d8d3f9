"""What a data name stands for: a named set's family (whose paper fixes its recipes) or
the user's own data. Every "is this SCAN?" question in compgen is asked here, once, so a
new named set changes this file and its reader, not a dozen prefix tests.

``task_of("scan/jump")`` -> ``Task(family="scan", split="jump")``; ``task_of("cogs")`` ->
family ``cogs``; ``task_of("my/pairs.tsv")`` -> family ``own``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePath

# the named families; a name is named when its head is one of them and it has a part
# after the slash (``cogs`` alone has none)
FAMILIES = ("scan", "sigmorphon", "lm", "cogs", "geoquery")
OWN = "own"


@dataclass(frozen=True)
class Task:
    data: str     # the name or path as given
    family: str   # one of FAMILIES, or "own"
    split: str    # the part after the family: "jump", "spa/hints-4.0", "sql-query"; "" else

    @property
    def named(self) -> bool:
        return self.family != OWN

    @property
    def scan(self) -> bool:
        return self.family == "scan"

    @property
    def generator_recipe(self) -> str:
        """How R&R generators are trained on it: the paper's SCAN or SIGMORPHON recipe, or
        the generic one (neighbourhoods by similarity; everything else, own data included)."""
        return {"scan": "scan", "sigmorphon": "sig"}.get(self.family, "generic")

    @property
    def keeps_own_dev(self) -> bool:
        """Whether a predictor watches the data's own ``dev`` split: the user's data, or a
        named set whose paper recipe does (GeoQuery); the other named sets keep their
        recipes (a held-out part of train, SIGMORPHON's ``val_hard``)."""
        return self.family in (OWN, "geoquery")

    def default_preset(self, kind: str) -> str:
        """The preset of ``kind`` (generator | predictor) a command uses without --config:
        the CPU size of the family's recipe; GeoQuery's predictor is the GECA paper's."""
        if kind == "predictor" and self.family == "geoquery":
            return "seq2seq_geo"
        if kind == "generator" and self.generator_recipe == "generic":
            return "recombine_generic_cpu"
        recipe = "sig" if self.family == "sigmorphon" else "scan"
        return f"{'recombine' if kind == 'generator' else 'seq2seq'}_{recipe}_cpu"

    def geca_preset(self) -> str | None:
        """GECA's preset when none is given: the generic one on own data, the paper's
        semantic-parsing settings on GeoQuery (its SQL or its logical-form scripts'), else
        GECA's defaults (None)."""
        if self.family == "geoquery":
            return "semparse-logic" if self.split.startswith("logic") else "semparse"
        return {OWN: "generic"}.get(self.family)

    def csl_preset(self) -> str:
        """CSL's preset when none is given: COGS's and SCAN's own, the generic one on
        anything else (the SQL of GeoQuery is not a SCAN-like language)."""
        return {"cogs": "cogs", "scan": "scan"}.get(self.family, "generic")


def task_of(data: str | PurePath) -> Task:
    text = str(data)
    head, _, rest = text.partition("/")
    if head in FAMILIES and (head == "cogs" or rest):
        return Task(text, head, rest)
    return Task(text, OWN, "")
