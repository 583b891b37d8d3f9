"""Filters over generated data and the rare-token resampling rule u(d).

Plain functions over token sequences, shared by every sampler (eager PyTorch, ONNX
Runtime, TorchScript, the C++ runner): a sampler produces token sequences ``x <sep> y``,
these functions decide which are kept.

Acceptance (spec §5.4): exactly one ``<sep>`` with both sides non-empty; for morphology
a well-formed lemma + tag bundle; the rare rule if resampling; not seen before (unique);
for SCAN, novel (the input is no training input and the output no training output);
every token known on its side.

The rare rule (spec §5.3): the paper keeps d iff min_t p(d_t) < eps (marginal token
frequency). The reference code implements it per task, and so do the defaults here:
SIGMORPHON keeps samples whose tags include a rare tag (training count in (1, 20] and an
uppercase first letter, or a fixed list such as PST,FUT); SCAN keeps samples whose input
contains a given word or n-gram ("jump" for the jump split, "around right" for
around_right). ``min_frequency_rule`` is the paper's eps form.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from compgen.data.vocab import SEP

Rule = Callable[[Sequence[str], Sequence[str]], bool]

DEFAULT_SCAN_RARE = {"jump": "jump", "turn_left": "turn left", "around_right": "around right",
                     "right": "right", "opposite_right": "opposite right",
                     "jump_around_right": "jump around right"}
RARE_TAG_MAX = 20  # tags with training count in (1, RARE_TAG_MAX] are rare (reference HEAD)
# any other data: the rare tokens together are held by at most this share of the distinct
# training pairs (and at least one)
RARE_TOKEN_SHARE = 0.01


# ------------------------------------------------------------------ shape of a datum

def split_datum(tokens: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """``x <sep> y`` -> (x, y); None unless there is exactly one <sep> and both sides
    are non-empty. ``tokens`` ends before </s>."""
    if list(tokens).count(SEP) != 1:
        return None
    i = list(tokens).index(SEP)
    x, y = list(tokens[:i]), list(tokens[i + 1:])
    return (x, y) if x and y else None


def is_tag(token: str) -> bool:
    return token[:1].isupper() or token[:1].isdigit()


def split_morph(x: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """lemma characters + tags -> (lemma, tags) at the first token whose first character
    is uppercase or a digit; None without any token made only of uppercase letters and
    digits."""
    if not any(t and all(c.isupper() or c.isdigit() for c in t) for t in x):
        return None
    i = next(i for i, t in enumerate(x) if is_tag(t))
    return list(x[:i]), list(x[i:])


def valid_morph(x: Sequence[str], train_tags: set[str]) -> bool:
    """A lemma followed by > 1 distinct known tags."""
    parts = split_morph(x)
    if parts is None:
        return False
    _, tags = parts
    return len(tags) > 1 and len(set(tags)) == len(tags) and all(t in train_tags for t in tags)


# ------------------------------------------------------------------ novelty / uniqueness

def is_novel(x: Sequence[str], y: Sequence[str], train_inputs: set[tuple],
             train_outputs: set[tuple]) -> bool:
    """Neither the input nor the output occurs in the training data (SCAN rule)."""
    return tuple(x) not in train_inputs and tuple(y) not in train_outputs


def known_tokens(x: Sequence[str], y: Sequence[str], input_tokens: set[str],
                 output_tokens: set[str]) -> bool:
    return all(t in input_tokens for t in x) and all(t in output_tokens for t in y)


def unique_pairs(pairs: Iterable[tuple[Sequence[str], Sequence[str]]],
                 seen: set | None = None) -> list[tuple[list[str], list[str]]]:
    """First occurrences only; ``seen`` (updated) carries over between calls."""
    seen = set() if seen is None else seen
    out = []
    for x, y in pairs:
        key = (tuple(x), tuple(y))
        if key not in seen:
            seen.add(key)
            out.append((list(x), list(y)))
    return out


# ------------------------------------------------------------------ rare rules

def contains_rule(phrase: str | Sequence[str]) -> Rule:
    """Keep d iff its input contains ``phrase`` (a word or space-separated n-gram)."""
    gram = tuple(phrase.split()) if isinstance(phrase, str) else tuple(phrase)
    n = len(gram)

    def rule(x, y):
        return any(tuple(x[i:i + n]) == gram for i in range(len(x) - n + 1))
    rule.phrase = gram  # what the C++ runner needs to apply the same rule
    return rule


def rare_tags(tag_lists: Iterable[Sequence[str]], max_count: int = RARE_TAG_MAX) -> set[str]:
    """Tags seen more than once and at most ``max_count`` times, starting uppercase."""
    counts = Counter(t for tags in tag_lists for t in tags)
    return {t for t, c in counts.items() if 1 < c <= max_count and t[:1].isupper()}


def rare_tag_rule(tags: Iterable[str]) -> Rule:
    """Keep d iff its tags (the x side after the lemma) include one of ``tags``."""
    wanted = set(tags)

    def rule(x, y):
        parts = split_morph(x)
        return parts is not None and any(t in wanted for t in parts[1])
    rule.tags = wanted  # what the C++ runner needs to apply the same rule
    return rule


def rare_tokens(pairs: Iterable[tuple[Sequence[str], Sequence[str]]],
                share: float = RARE_TOKEN_SHARE) -> list[str]:
    """The rare tokens of data that are neither SCAN nor SIGMORPHON, sorted: the rarest
    tokens (counted once per distinct training pair, either side), taken a whole count
    level at a time from the rarest up, while the pairs holding any of them stay within
    ``max(1, floor(share * N))`` of the N distinct pairs. A filter keeping samples with
    one of them so keeps what at most 1 % of the training data look like: SCAN jump's
    ``jump`` and ``I_JUMP`` (one pair of 13,204). Data whose rarest words are spread
    over many pairs (hundreds of place names, each in a few questions) have none."""
    distinct = list({(tuple(x), tuple(y)) for x, y in pairs})
    budget = max(1, int(share * len(distinct)))
    holders: dict[str, list[int]] = {}
    for number, (x, y) in enumerate(distinct):
        for token in set(x) | set(y):
            holders.setdefault(token, []).append(number)
    levels: dict[int, list[str]] = {}
    for token, held in holders.items():
        levels.setdefault(len(held), []).append(token)
    chosen: list[str] = []
    covered: set[int] = set()
    for count in sorted(levels):
        widened = covered.union(*(holders[token] for token in levels[count]))
        if count > budget or len(widened) > budget:
            break
        chosen += levels[count]
        covered = widened
    return sorted(chosen)


def rare_summary(tokens: Sequence[str], shown: int = 5) -> str:
    """A count and the first few tokens (``12: and, to, …``), or ``none found``."""
    if not tokens:
        return "none found"
    more = ", …" if len(tokens) > shown else ""
    return f"{len(tokens)}: {', '.join(tokens[:shown])}{more}"


def any_token_rule(tokens: Iterable[str]) -> Rule:
    """Keep d iff its input or output holds one of ``tokens``."""
    wanted = frozenset(tokens)

    def rule(x, y):
        return any(t in wanted for t in x) or any(t in wanted for t in y)
    rule.tokens = wanted  # what the C++ runner needs to apply the same rule
    return rule


def min_frequency_rule(sequences: Iterable[Sequence[str]], eps: float) -> Rule:
    """The paper's u(d) = 1[min_t p(d_t) < eps], p = token frequency in ``sequences``
    (unseen tokens count as frequency 0)."""
    counts = Counter(t for s in sequences for t in s)
    total = sum(counts.values()) or 1

    def rule(x, y):
        toks = list(x) + list(y)
        return bool(toks) and min(counts.get(t, 0) / total for t in toks) < eps
    return rule


# ------------------------------------------------------------------ the whole filter

@dataclass
class SampleFilter:
    """Acceptance test of §5.4 with state (the pairs accepted so far)."""
    train_inputs: set
    train_outputs: set
    input_tokens: set
    output_tokens: set
    novel: bool = True
    rule: Rule | None = None
    train_tags: set | None = None  # morphology: the known tags (enables valid_morph)
    seen: set = field(default_factory=set)

    @classmethod
    def from_pairs(cls, pairs: Sequence[tuple[Sequence[str], Sequence[str]]], *, novel=True,
                   rule=None, morphology=False) -> SampleFilter:
        inputs = {tuple(x) for x, _ in pairs}
        outputs = {tuple(y) for _, y in pairs}
        tags = None
        if morphology:
            tags = {t for x, _ in pairs for t in (split_morph(x) or ([], []))[1]}
        return cls(inputs, outputs, {t for x in inputs for t in x}, {t for y in outputs for t in y},
                   novel, rule, tags)

    def rejects_input(self, x: Sequence[str]) -> bool:
        """True when ``accept`` rejects every datum with input ``x``, whatever its output:
        a decoder can stop such a row as soon as it has written ``x <sep>``."""
        if not x or not all(t in self.input_tokens for t in x):
            return True
        if self.novel and tuple(x) in self.train_inputs:
            return True
        if self.train_tags is not None and not valid_morph(x, self.train_tags):
            return True
        # a rule that reads the input alone (the rare phrase of SCAN)
        return getattr(self.rule, "phrase", None) is not None and not self.rule(x, ())

    def accept(self, tokens: Sequence[str]) -> tuple[list[str], list[str]] | None:
        parts = split_datum(tokens)
        if parts is None:
            return None
        x, y = parts
        if self.train_tags is not None and not valid_morph(x, self.train_tags):
            return None
        if self.rule is not None and not self.rule(x, y):
            return None
        key = (tuple(x), tuple(y))
        if key in self.seen:
            return None
        if self.novel and not is_novel(x, y, self.train_inputs, self.train_outputs):
            return None
        if not known_tokens(x, y, self.input_tokens, self.output_tokens):
            return None
        self.seen.add(key)
        return x, y


def sig_rare_choice(rare: str | None) -> tuple[str, set[str] | None]:
    """--rare for morphology -> (Omega's rare-tag choice, explicit tag set or None).
    "auto"/"data" = tags with training count in (1, 20]; "fixed" = PST,FUT; or a list."""
    if not rare or rare in ("auto", "data"):
        return "data", None
    tags = {"PST", "FUT"} if rare == "fixed" else {t.strip() for t in rare.split(",") if t.strip()}
    return ("fixed" if tags == {"PST", "FUT"} else "data"), tags


def scan_rare_phrase(split: str, rare: str | None) -> str:
    """The phrase SCAN resampling asks for: --rare, else the split's (jump, around right)."""
    return rare if rare and rare != "auto" else DEFAULT_SCAN_RARE.get(split, "jump")
