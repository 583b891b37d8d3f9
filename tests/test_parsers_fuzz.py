"""Every data-file parser, fuzzed: it returns a well-formed result or raises UserError."""

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compgen.data.cogs import parse_cogs
from compgen.data.lm import parse_corpus
from compgen.data.scan import parse_scan
from compgen.data.sigmorphon import parse_sigmorphon
from compgen.data.vocab import SPECIALS, Vocab
from compgen.errors import UserError
from compgen.io import parse_samples_tsv

FUZZ = settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# pieces that make near-valid lines likely, plus arbitrary text
PIECES = [
    "IN: ",
    " OUT: ",
    "IN:",
    "OUT:",
    "\t",
    "\n",
    "\r\n",
    " ",
    ";",
    "#",
    "jump",
    "I_JUMP",
    "walk twice",
    "V",
    "PST",
    "x _ 1",
    "a",
    "é",
    "İ",
    "\x85",
    "\u2028",
    "\x00",
    "",
]
texts = st.one_of(
    st.text(max_size=80),
    st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=4)), max_size=30).map("".join),
)


def check_tokens(tokens, allow_empty=False):
    assert isinstance(tokens, list) and (allow_empty or tokens)
    for tok in tokens:
        assert isinstance(tok, str) and tok and tok == tok.strip() and len(tok.split()) == 1


def outcome(parse, text):
    try:
        return parse(text, "<fuzz>")
    except UserError as exc:
        assert str(exc)  # one clear message
        return None


def check_scan(result):
    xs, ys = result
    assert len(xs) == len(ys) >= 1
    for x, y in zip(xs, ys):
        check_tokens(x), check_tokens(y)
        assert "OUT:" not in x and "IN:" not in y


def check_sigmorphon(rows):
    assert rows
    for lemma, form, tags in rows:
        assert lemma and form and tags and all(tags)
        for field in [lemma, form, *tags]:
            assert isinstance(field, str) and "\t" not in field and "\n" not in field
        assert not any(";" in t for t in tags)


def check_cogs(result):
    xs, ys, types = result
    assert len(xs) == len(ys) == len(types) >= 1
    for x, y, kind in zip(xs, ys, types):
        check_tokens(x), check_tokens(y)
        assert kind and kind == kind.strip()


def check_corpus(sentences):
    assert sentences
    for s in sentences:
        check_tokens(s)


def check_samples(pairs):
    assert pairs
    for x, y in pairs:
        check_tokens(x, allow_empty=True), check_tokens(y, allow_empty=True)


PARSERS = [
    (parse_scan, check_scan),
    (parse_sigmorphon, check_sigmorphon),
    (parse_cogs, check_cogs),
    (lambda t, s: parse_cogs(t, s, join_variables=False), check_cogs),
    (parse_corpus, check_corpus),
    (parse_samples_tsv, check_samples),
]


@FUZZ
@given(texts)
def test_text_parsers(text):
    """Each generated text goes through every text parser (1000 inputs per parser)."""
    for parse, check in PARSERS:
        result = outcome(parse, text)
        if result is not None:
            check(result)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(["<pad>", "a", "", 1.5]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(["tokens", "a"]), inner, max_size=2)
    ),
    max_leaves=6,
)
vocab_like = st.lists(st.text(max_size=5), max_size=6).map(
    lambda extra: {"tokens": list(SPECIALS) + extra}
)
vocab_texts = st.one_of(
    texts,
    json_values.map(json.dumps),
    vocab_like.map(json.dumps),
    st.integers(min_value=4000, max_value=4400).map(lambda n: "9" * n),  # over-long integers
    st.integers(min_value=1, max_value=1500).map(lambda n: "[" * n + "]" * n),  # deep nesting
)


@FUZZ
@given(vocab_texts)
def test_vocab_from_json(text):
    vocab = outcome(Vocab.from_json, text)
    if vocab is not None:
        assert tuple(vocab.tokens[: len(SPECIALS)]) == SPECIALS
        assert len(set(vocab.tokens)) == len(vocab.tokens)
        assert all(isinstance(t, str) for t in vocab.tokens)
        assert Vocab.from_json(vocab.to_json()) == vocab
