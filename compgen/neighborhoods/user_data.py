"""A generator trained on the user's own data carries what sampling needs.

A data set that is neither SCAN nor SIGMORPHON (a file or folder of ``x<TAB>y`` pairs)
is recorded in the generator's config under ``data_snapshot``: the training pairs (for
the novelty filter, the vocabulary check and Omega), the rare tokens found in them
(``compgen.data.resample.rare_tokens``), the neighbourhood procedure and the prototype-length
statistics that fix Omega. ``compgen sample`` and ``compgen export`` rebuild Omega from
it, so neither needs the data file or ``--data-dir`` again.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from compgen.data import load_dataset
from compgen.data.resample import SampleFilter, any_token_rule, rare_tokens
from compgen.data.table import make_table
from compgen.errors import SettingError, UserError
from compgen.neighborhoods.generic import generic_omega, prototype_lengths
from compgen.neighborhoods.scan import unique_generative_data

SNAPSHOT_KEY = "data_snapshot"


def has_snapshot(config: dict) -> bool:
    return isinstance(config.get(SNAPSHOT_KEY), dict)


def make_snapshot(train: pl.DataFrame, triples: pl.DataFrame, neighborhood: str,
                  similarity: str, max_missing: int) -> dict:
    pairs = list(zip(train["x"].to_list(), train["y"].to_list()))
    return {
        "pairs": [[" ".join(x), " ".join(y)] for x, y in pairs],
        "rare": rare_tokens(pairs),
        "neighborhood": neighborhood,
        "similarity": similarity,
        "max_missing": max_missing,
        "prototype_lengths": prototype_lengths(triples),
    }


def snapshot_table(config: dict, source: str = "the checkpoint") -> pl.DataFrame:
    """The training pairs recorded in a generator's config, as an example table."""
    snapshot = config[SNAPSHOT_KEY]
    try:
        pairs = [(str(x).split(), str(y).split()) for x, y in snapshot["pairs"]]
    except (KeyError, TypeError, ValueError):
        raise UserError(f"{source}: damaged {SNAPSHOT_KEY} (pairs)") from None
    return make_table([x for x, _ in pairs], [y for _, y in pairs], "train")


def training_table(config: dict, data_dir=None) -> pl.DataFrame:
    """The table sampling and export read: the recorded pairs where the generator has
    them, else the named data set (SCAN, SIGMORPHON: read from ``data_dir``)."""
    if has_snapshot(config):
        return snapshot_table(config)

    return load_dataset(config["data"], data_dir)


def rare_choice(config: dict, rare: str | None, table: pl.DataFrame) -> list[str]:
    """``--rare`` for user data: ``auto``/unset -> the rare tokens of the training pairs
    (``rare_tokens``, found again: a generator trained under an earlier rule gets
    today's); ``TOK,TOK`` -> these tokens, each of which must occur in training."""
    if not rare or rare == "auto":
        return rare_tokens(zip(table["x"].to_list(), table["y"].to_list()))
    tokens = [t.strip() for t in rare.split(",") if t.strip()]
    known = set(table["x"].explode().drop_nulls()) | set(table["y"].explode().drop_nulls())
    unknown = [t for t in tokens if t not in known]
    if unknown or not tokens:
        raise SettingError(f"`rare` {rare}: {', '.join(unknown) or 'no token'} is not a token "
                           f"of the training data ({config.get('data')})")
    return tokens


def user_prototype_source(config: dict, table: pl.DataFrame, nproto: int, seed: int,
                          resample: str = "none", rare: str | None = None,
                          rare_prototypes: bool = False, prototype_cut: str = "mean"):
    """Omega of a generator trained on user data: a function k -> k prototype tuples.
    ``rare_prototypes`` keeps only tuples holding a rare token (``--rare``)."""
    if rare_prototypes and resample != "rare":
        raise SettingError("`rare_prototypes`: needs `resample` rare")
    if nproto == 0:
        return lambda k: [() for _ in range(k)]
    snapshot = config[SNAPSHOT_KEY]
    wanted = rare_choice(config, rare, table) if rare_prototypes else ()
    try:
        omega = generic_omega(unique_generative_data(table), nproto, snapshot["neighborhood"],
                              snapshot["prototype_lengths"], prototype_cut, wanted,
                              int(snapshot.get("max_missing", 2)), np.random.default_rng(seed))
    except (KeyError, TypeError) as exc:
        raise UserError(f"damaged {SNAPSHOT_KEY} in the generator's config ({exc})") from None
    except ValueError as exc:
        raise SettingError(f"`rare` {rare or 'auto'}: {exc}") from None
    if len(omega) == 0:
        raise SettingError(f"no prototype tuple {'holds a rare token' if wanted else 'qualifies'} "
                           f"(`prototype_cut` {prototype_cut}); try `prototype_cut` none"
                           + (" or `all_prototypes`" if wanted else ""))
    return omega.sample


def rare_auto_finds_none(config: dict) -> bool:
    """A generator trained on user data whose training pairs have no rare token: ``--rare
    auto`` can only filter there by tokens the user names."""
    if not has_snapshot(config):
        return False
    pairs = config[SNAPSHOT_KEY].get("pairs") or []
    return not rare_tokens((str(x).split(), str(y).split()) for x, y in pairs)


def export_prototype_options(config: dict) -> dict:
    """The preset's Omega options an export stores its prototype tuples with (user
    data only: a SCAN or SIGMORPHON export keeps its own defaults)."""
    if not has_snapshot(config):
        return {}
    preset = config.get("sample", {})
    return {"resample": preset.get("resample", "none"), "rare": preset.get("rare"),
            "rare_prototypes": bool(preset.get("rare_prototypes", False)),
            "prototype_cut": preset.get("prototype_cut", "mean")}


def user_filter(config: dict, train: pl.DataFrame, pairs: list, resample: str,
                rare: str | None):
    """The acceptance test for user data: well formed, unique, known tokens, novel
    (neither input nor output seen in training; the preset's ``novel`` turns it off)
    and, with ``--resample rare``, holding a rare token (``rare_choice``)."""
    if resample not in ("none", "rare"):
        raise SettingError(f"`resample` {resample}: unknown (valid: none, rare)")
    rule = any_token_rule(rare_choice(config, rare, train)) if resample == "rare" else None
    if resample == "rare" and not rule.tokens:
        raise SettingError("`resample` rare: `rare` auto found no rare token in the training "
                           "data (the rarest tokens are held by more than 1 % of the pairs "
                           "together); name some with `rare` TOK,TOK")
    novel = bool(config.get("sample", {}).get("novel", True))
    return SampleFilter.from_pairs(pairs, novel=novel, rule=rule, morphology=False)
