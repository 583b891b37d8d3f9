"""SIGMORPHON 2018 task 1: ``lemma<TAB>form<TAB>TAG;TAG;...`` lines.

Plain loading of the shared-task files (``<lang>-train-{low,medium,high}``, ``-dev``,
``-test``) and the R&R few-shot splits (:func:`load_fewshot`, ``hints-<h>.<i>``) built
from ``<lang>-train-high``. Tokens are characters (spaces included); tags are single tokens.
Two token orders: *reinflection* (x = lemma chars + tags, y = form chars; generators)
and *analysis* (x = form chars, y = lemma chars + tags; the conditional model).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from pathlib import Path

import numpy as np
import polars as pl

from compgen.data.fewshot_neighbors import sig_neighborhoods
from compgen.data.sources import default_cache_dir
from compgen.errors import UserError, not_a_file, read_text, where
from compgen.io import atomic_open

PLAIN_SPLITS = ("train-low", "train-medium", "train-high", "dev", "test")
PAPER_LANGUAGES = ("spanish", "swahili", "turkish")

SCHEMA = {"x": pl.List(pl.String), "y": pl.List(pl.String), "split": pl.String,
          "lemma": pl.String, "form": pl.String, "tags": pl.List(pl.String)}


def parse_sigmorphon(text: str, source: str = "<sigmorphon>") -> list[tuple[str, str, list[str]]]:
    """Parse task-1 lines into (lemma, form, tags) triples."""
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise UserError(
                f"{where(source, lineno)}: expected 'lemma<TAB>form<TAB>TAGS', "
                f"found {len(fields)} field(s)"
            )
        lemma, form, tags = fields
        tag_list = tags.strip().split(";")
        if not lemma or not form or not all(tag_list):
            raise UserError(f"{where(source, lineno)}: empty lemma, form or tag")
        rows.append((lemma, form, tag_list))
    if not rows:
        raise UserError(f"{source}: no SIGMORPHON examples in file")
    return rows


def make_morph_table(rows, split, order: str = "reinflection") -> pl.DataFrame:
    """Rows of (lemma, form, tags) -> example table in the given token order."""
    if order not in ("reinflection", "analysis"):
        raise UserError(f"unknown token order '{order}' (valid: reinflection, analysis)")
    splits = [split] * len(rows) if isinstance(split, str) else list(split)
    xs, ys = [], []
    for lemma, form, tags in rows:
        source = list(lemma) + list(tags)
        if order == "reinflection":
            xs.append(source)
            ys.append(list(form))
        else:
            xs.append(list(form))
            ys.append(source)
    return pl.DataFrame(
        {"x": xs, "y": ys, "split": splits, "lemma": [r[0] for r in rows],
         "form": [r[1] for r in rows], "tags": [list(r[2]) for r in rows]},
        schema=SCHEMA,
    )


def read_sigmorphon_file(path: str | Path, split: str = "train",
                         order: str = "reinflection") -> pl.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: {not_a_file(path)}")
    return make_morph_table(parse_sigmorphon(read_text(path), str(path)),
                            split, order)


def available_languages(data_dir: Path) -> list[str]:
    folder = data_dir / "sigmorphon2018"
    if not folder.is_dir():
        return []
    return sorted({p.name.rsplit("-train-high", 1)[0] for p in folder.glob("*-train-high")})


def load_sigmorphon(lang: str, data_dir: Path, order: str = "reinflection") -> pl.DataFrame:
    """Every shared-task file of ``lang``; the ``split`` column names the file."""
    folder = data_dir / "sigmorphon2018"
    if not (folder / f"{lang}-train-high").is_file():
        langs = available_languages(data_dir)
        raise UserError(
            f"unknown SIGMORPHON language '{lang}' in {folder} "
            f"(valid: {', '.join(langs) if langs else 'none; run compgen data fetch sigmorphon'})"
        )
    parts = []
    for split in PLAIN_SPLITS:
        path = folder / f"{lang}-{split}"
        if path.is_file():
            parts.append(read_sigmorphon_file(path, split, order))
    return pl.concat(parts)


# ----------------------------------------------------------------------------- few-shot
# The R&R few-shot splits: 1000 training items of which 2h are "hints" of the held-out
# tag types (h with PST = validation, h with FUT = test), easy/hard val and test sets of
# 100, and four (first, second) prototype pairs per item. They are rebuilt here exactly
# as the reference build script makes them, including its random number stream: two
# numpy RandomStates (seeds 0 and 1) shared by all 15 builds, made in the order
# hints 4, 8, 16 x split 0..4 -- so a build can only be made after replaying the ones
# before it. Built splits are cached as JSON.

TRAIN_COUNT, TEST_COUNT, TEST_TAG_TOKENS, NEIGHBORS = 1000, 100, 20, 4
VAL_TAG, TEST_TAG = "PST", "FUT"
HINTS = (4, 8, 16)
SPLIT_INDICES = tuple(range(5))
BUILDS = tuple((h, i) for h in HINTS for i in SPLIT_INDICES)   # the reference build order
FEWSHOT_SPLITS = ("train", "val_easy", "val_hard", "test_easy", "test_hard")
PREP_SPECIALS = ("<pad>", "<s>", "</s>", "<copy>", "<unk>", "<sep>")
CACHE_VERSION = 1
FEWSHOT_SCHEMA = {**SCHEMA, "neighbors": pl.List(pl.List(pl.Int64)), "index": pl.Int64}


def fewshot_specs() -> list[str]:
    return [f"hints-{h}.{i}" for h, i in BUILDS]


def parse_fewshot_spec(spec: str) -> tuple[int, int]:
    m = re.fullmatch(r"hints-(\d+)\.(\d+)", spec)
    if m is None or (int(m.group(1)), int(m.group(2))) not in BUILDS:
        raise UserError(f"unknown few-shot split '{spec}' (valid: {', '.join(fewshot_specs())})")
    return int(m.group(1)), int(m.group(2))


def simple_lower(token: str, turkish: bool = False) -> str:
    """Per-character *simple* lowercase (one character -> one character): unlike
    ``str.lower``, ``İ`` becomes ``i`` (not ``i`` + combining dot); Turkish maps
    ``I`` to dotless ``ı``."""
    out = []
    for c in token:
        if turkish and c == "I":
            out.append("ı")
        elif c == "İ":
            out.append("i")
        else:
            low = c.lower()
            out.append(low if len(low) == 1 else c)
    return "".join(out)


def special_lowercase(tokens: list[str], turkish: bool = False) -> list[str]:
    """The reference reader's lowercasing: the first token, every token after a space,
    and every token up to (and including) a space are lowercased; the rest (tags, and
    capitals inside the last word) are kept."""
    out = list(tokens)
    start = True
    for i, tok in enumerate(tokens):
        if start:
            out[i] = simple_lower(out[i], turkish)
        if tok == " ":
            out[: i + 1] = [simple_lower(t, turkish) for t in out[: i + 1]]
            start = True
        else:
            start = False
    return out


def _is_tag_start(token: str) -> bool:
    c = token[:1]
    return bool(c) and (c.isupper() or unicodedata.category(c).startswith("N"))


def split_lemma_tags(tokens: list[str]) -> tuple[list[str], list[str]]:
    """Lemma characters | tags: split at the first token starting with an uppercase
    letter or a digit."""
    for k, tok in enumerate(tokens):
        if _is_tag_start(tok):
            return tokens[:k], tokens[k:]
    return list(tokens), []


def read_fewshot_rows(lemma: str, form: str, tags: list[str], lang: str):
    """One build item as the reference reader sees it: (lemma chars, form chars, tags)
    after special lowercasing and the lemma/tag split."""
    turkish = lang == "turkish"
    left = special_lowercase(list(lemma) + list(tags), turkish)
    lemma_chars, tag_tokens = split_lemma_tags(left)
    return lemma_chars, special_lowercase(list(form), turkish), tag_tokens


def _read_prep_lines(path: Path, lang: str):
    """The build script's view of ``<lang>-train-high``: (lemma, form, tags) per line,
    and the encoded sequences (prep vocabulary ids, first-seen order)."""
    vocab = {tok: i for i, tok in enumerate(PREP_SPECIALS)}
    prefix = f"<{lang}>"
    rows, seqs = [], []
    for lineno, line in enumerate(read_text(path).split("\n"), 1):
        if not line.strip():
            continue
        fields = line.strip().split("\t")
        if len(fields) != 3 or not fields[0] or not fields[1] or not all(fields[2].split(";")):
            raise UserError(f"{where(path, lineno)}: expected 'lemma<TAB>form<TAB>TAGS'")
        lemma, form, morph = fields
        tags = morph.split(";")
        for tok in [prefix, *form, *lemma, *tags]:
            vocab.setdefault(tok, len(vocab))
        seq = [prefix, *lemma, *tags, "<sep>", *form]
        seqs.append((1, *(vocab[t] for t in seq), 2))
        rows.append((lemma, form, tags))
    return rows, seqs


class _FewshotBuilder:
    """Replays the reference build sequence for one language."""

    def __init__(self, path: Path, lang: str):
        self.lang = lang
        rows, seqs = _read_prep_lines(path, lang)
        order = sorted(range(len(seqs)), key=lambda k: seqs[k])   # sorted(seqs), stable
        self.rows = [rows[k] for k in order]
        # tag types = the full tag tuple; sorted set, then grouped in sorted-seq order
        types = sorted({tuple(r[2]) for r in self.rows})
        type_id = {t: k for k, t in enumerate(types)}
        self.type_of = np.array([type_id[tuple(r[2])] for r in self.rows])
        self.val_types = [k for k, t in enumerate(types) if VAL_TAG in t]
        self.test_types = [k for k, t in enumerate(types) if TEST_TAG in t]
        held_out = set(self.val_types) | set(self.test_types)
        self.train_like = np.array([k for k in range(len(self.rows))
                                    if self.type_of[k] not in held_out], dtype=np.int64)
        self.members = {t: np.nonzero(self.type_of == t)[0] for t in held_out}
        self.rand = np.random.RandomState(0)
        self.test_rand = np.random.RandomState(1)

    def _permute(self, rand, items: np.ndarray) -> np.ndarray:
        # permuting indices consumes the stream exactly like permuting the items
        return items[rand.permutation(len(items))]

    def build(self, hints: int) -> dict:
        val_like = [self._permute(self.test_rand, self.members[t])[:TEST_TAG_TOKENS]
                    for t in self.val_types]
        test_like = [self._permute(self.test_rand, self.members[t])[:TEST_TAG_TOKENS]
                     for t in self.test_types]
        train_like = self._permute(self.rand, self.train_like)
        val_like = self._permute(self.test_rand, np.concatenate(val_like or [np.zeros(0, int)]))
        test_like = self._permute(self.test_rand, np.concatenate(test_like or [np.zeros(0, int)]))
        for tag, like in ((VAL_TAG, val_like), (TEST_TAG, test_like)):
            if len(like) < hints + TEST_COUNT:
                raise UserError(f"SIGMORPHON {self.lang}: {len(like)} usable items tagged {tag} "
                                f"(a hints-{hints} split needs {hints + TEST_COUNT})")
        parts = {
            "train": np.concatenate([train_like[: TRAIN_COUNT - 2 * hints], val_like[:hints],
                                     test_like[:hints]]),
            "val_easy": train_like[TRAIN_COUNT:TRAIN_COUNT + TEST_COUNT],
            "val_hard": val_like[hints:][:TEST_COUNT],
            "test_easy": train_like[TRAIN_COUNT + TEST_COUNT:TRAIN_COUNT + 2 * TEST_COUNT],
            "test_hard": test_like[hints:][:TEST_COUNT],
        }
        for name, items in parts.items():
            want = TRAIN_COUNT if name == "train" else TEST_COUNT
            if len(items) != want:
                raise UserError(f"SIGMORPHON {self.lang}: too few items for the few-shot "
                                f"'{name}' set ({len(items)}, need {want})")
        chosen = np.concatenate(list(parts.values()))
        rows = [self.rows[k] for k in chosen]
        neighbors = sig_neighborhoods([r[2] for r in rows], [r[0] for r in rows],
                                      TRAIN_COUNT, self.rand, NEIGHBORS)
        return {"rows": [[lemma, form, tags] for lemma, form, tags in rows],
                "split": [name for name, items in parts.items() for _ in items],
                "neighbors": neighbors.tolist(),
                "rng_after": {"rand": _rng_state(self.rand),
                              "test_rand": _rng_state(self.test_rand)}}

    def restore(self, states: dict) -> None:
        """Continue the build sequence from the random states saved after a build."""
        self.rand.set_state(_rng_from(states["rand"]))
        self.test_rand.set_state(_rng_from(states["test_rand"]))


def _rng_state(rand: np.random.RandomState) -> list:
    name, key, pos, has_gauss, gauss = rand.get_state()
    return [name, key.tolist(), int(pos), int(has_gauss), float(gauss)]


def _rng_from(state: list) -> tuple:
    name, key, pos, has_gauss, gauss = state
    return (name, np.array(key, dtype=np.uint32), pos, has_gauss, gauss)


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_fewshot(lang: str, spec: str, data_dir: Path, cache_dir: Path | None = None) -> dict:
    """The raw build (file strings, split names, neighbour pairs) of one few-shot split,
    from the cache or by replaying the reference builds up to it (caching each)."""
    hints, index = parse_fewshot_spec(spec)
    path = Path(data_dir) / "sigmorphon2018" / f"{lang}-train-high"
    langs = available_languages(Path(data_dir))
    if lang not in langs or not path.is_file():
        folder = Path(data_dir) / "sigmorphon2018"
        raise UserError(f"unknown SIGMORPHON language '{lang}' in {folder} "
                        f"(valid: {', '.join(langs) if langs else 'none'})")
    digest = _file_digest(path)
    folder = Path(cache_dir or default_cache_dir()) / "sigmorphon" / lang

    def cached(h, i):
        try:
            data = json.loads((folder / f"hints-{h}.{i}.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        ok = isinstance(data, dict) and data.get("version") == CACHE_VERSION \
            and data.get("source_sha256") == digest
        return data if ok else None

    hit = cached(hints, index)
    if hit is not None:
        return hit
    builder = _FewshotBuilder(path, lang)
    # resume after the latest cached build before the wanted one (its saved RNG states)
    target = BUILDS.index((hints, index))
    start = 0
    for k in range(target - 1, -1, -1):
        before = cached(*BUILDS[k])
        if before is not None and "rng_after" in before:
            builder.restore(before["rng_after"])
            start = k + 1
            break
    for h, i in BUILDS[start:]:
        data = builder.build(h)
        data.update(version=CACHE_VERSION, source_sha256=digest, lang=lang, spec=f"hints-{h}.{i}")
        try:
            with atomic_open(folder / f"hints-{h}.{i}.json", "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False)
        except OSError:
            pass   # an unwritable cache only costs time
        if (h, i) == (hints, index):
            return data
    raise AssertionError("unreachable")


def load_fewshot(lang: str, spec: str, data_dir, order: str = "reinflection",
                 cache_dir: Path | None = None) -> pl.DataFrame:
    """One R&R few-shot split (``spec`` = ``hints-<4|8|16>.<0-4>``) as an example table.

    Columns: x, y (token lists in ``order``: reinflection x = lemma chars + tags, y =
    form chars; analysis the reverse), split (train, val_easy, val_hard, test_easy,
    test_hard), lemma, form, tags, neighbors (four [i1, i2] row indices of training
    prototypes) and index (row number). Rows are in build order: train 0-999 (the 2h
    hints last: h PST, then h FUT), val_easy, val_hard, test_easy, test_hard (100 each).
    Strings are read as the reference reader does: special lowercasing (Turkish I -> ı)
    and a lemma/tag split at the first uppercase or numeric token.
    """
    if order not in ("reinflection", "analysis"):
        raise UserError(f"unknown token order '{order}' (valid: reinflection, analysis)")
    data = build_fewshot(lang, spec, Path(data_dir), cache_dir)
    lemmas, forms, tags, xs, ys = [], [], [], [], []
    for lemma, form, tag_list in data["rows"]:
        lemma_chars, form_chars, tag_tokens = read_fewshot_rows(lemma, form, tag_list, lang)
        source = lemma_chars + tag_tokens
        xs.append(source if order == "reinflection" else form_chars)
        ys.append(form_chars if order == "reinflection" else source)
        lemmas.append("".join(lemma_chars))
        forms.append("".join(form_chars))
        tags.append(tag_tokens)
    return pl.DataFrame({"x": xs, "y": ys, "split": data["split"], "lemma": lemmas,
                         "form": forms, "tags": tags, "neighbors": data["neighbors"],
                         "index": list(range(len(xs)))}, schema=FEWSHOT_SCHEMA)
