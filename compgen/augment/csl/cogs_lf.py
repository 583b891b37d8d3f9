"""COGS logical forms <-> the variable-free form CSL induces grammars over.

Forward: nouns become values (``cat``, definite ``* cat``), verbs become calls whose
arguments are their roles, variables are replaced by their values, starting at the one
variable that is never an argument: ``give ( agent = Camila , theme = cake ( nmod . in =
storage ) , recipient = Emma )``. Primitive examples (one word, a lambda term) become the
word itself.

Inverse: a value's variable is the sentence position of its word (verbs through a table
of inflected forms -> lemmas, read off training pairs); definite nouns go to the ``;``
prefix, the other terms are ordered by their first variable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from compgen.errors import UserError


def _norm(lf: str) -> list[str]:
    return lf.replace(" _ ", "_").split()


def _split(tokens: list[str], sep: str) -> list[list[str]]:
    parts: list[list[str]] = [[]]
    for t in tokens:
        if t == sep:
            parts.append([])
        else:
            parts[-1].append(t)
    return [p for p in parts if p]


def _terms(lf: str):
    """(definite?, predicate parts, args) per conjunct of a COGS logical form."""
    out = []
    for chunk in _split(_norm(lf), ";"):
        for term in _split(chunk, "AND"):
            star = term[0] == "*"
            body = term[1:] if star else term
            if "(" not in body or body[-1] != ")":
                raise ValueError(f"not a COGS term: {' '.join(term)}")
            k = body.index("(")
            args = [a for a in body[k + 1:-1] if a != ","]
            out.append((star, body[:k], args))
    return out


def is_primitive(lf: str) -> bool:
    return lf.startswith("LAMBDA")


def to_variable_free(sentence: Sequence[str], lf: str) -> str:
    """The variable-free target of one COGS example."""
    if is_primitive(lf) or len(sentence) == 1:
        return sentence[0]
    labels: dict[str, str] = {}
    children: dict[str, list[tuple[str, str]]] = {}
    heads: list[str] = []
    arguments: set[str] = set()
    for star, pred, args in _terms(lf):
        head = args[0]
        if head not in heads:
            heads.append(head)
        if len(args) == 1:
            labels[head] = ("* " if star else "") + pred[0]
        else:
            labels.setdefault(head, pred[0])
            children.setdefault(head, []).append((" ".join(pred[2:]), args[1]))
            arguments.add(args[1])
    roots = [h for h in heads if h not in arguments]
    if len(roots) != 1:
        raise ValueError(f"{len(roots)} root variables in: {lf}")

    def render(value: str, depth: int = 0) -> str:
        if depth > 50:
            raise ValueError(f"cyclic logical form: {lf}")
        if value not in labels:  # a proper name
            return value
        kids = children.get(value)
        if not kids:
            return labels[value]
        inner = " , ".join(f"{role} = {render(arg, depth + 1)}" for role, arg in kids)
        return f"{labels[value]} ( {inner} )"

    return render(roots[0])


def lemma_table(pairs: Iterable[tuple[Sequence[str], str]]) -> dict[str, str]:
    """Inflected form -> lemma for the verbs of (sentence, logical form) training pairs."""
    table: dict[str, str] = {}
    for sentence, lf in pairs:
        if is_primitive(lf) or len(sentence) == 1:
            continue
        for _, pred, args in _terms(lf):
            if len(args) == 2 and len(pred) == 3:  # verb . role ( e , arg )
                position = int(args[0].split("_")[1])
                if position < len(sentence):
                    table.setdefault(sentence[position], pred[0])
    return table


def _parse_value(tokens: list[str], i: int):
    """FUNC := [*] NAME [ ( KEY = FUNC , ... ) ] -> ((star, name, [(key, FUNC)]), next index)."""
    star = tokens[i] == "*"
    if star:
        i += 1
    name = tokens[i]
    i += 1
    args = []
    if i < len(tokens) and tokens[i] == "(":
        i += 1
        while True:
            eq = tokens.index("=", i)
            key = tokens[i:eq]
            value, i = _parse_value(tokens, eq + 1)
            args.append((" ".join(key), value))
            if tokens[i] == ",":
                i += 1
                continue
            if tokens[i] != ")":
                raise ValueError(f"expected ')' at token {i}")
            i += 1
            break
    return (star, name, args), i


def from_variable_free(sentence: Sequence[str], target: str, lemmas: dict[str, str]) -> str:
    """The COGS logical form of a variable-free target (not for primitive examples)."""
    tokens = target.split()
    try:
        tree, end = _parse_value(tokens, 0)
    except (IndexError, ValueError):
        raise ValueError(f"not a variable-free COGS target: {target!r}") from None
    if end != len(tokens):
        raise ValueError(f"trailing tokens in {target!r}")
    words = [lemmas.get(w, w) for w in sentence]
    seen: dict[str, int] = {}

    def position(name: str) -> int:
        spots = [k for k, w in enumerate(words) if w == name or w.lower() == name]
        if not spots:
            raise ValueError(f"{name!r} is not in the sentence {' '.join(sentence)!r}")
        k = seen.get(name, 0)
        seen[name] = k + 1
        return spots[min(k, len(spots) - 1)]

    definite: dict[int, str] = {}
    terms: list[tuple[int, int, str]] = []  # (head position, order, text)
    cache: dict[int, str] = {}

    def visit(node) -> str:
        star, name, args = node
        if name[:1].isupper() and not star and not args:
            return name
        var = position(name)
        ref = f"x _ {var}"
        if var in cache:
            return ref
        cache[var] = ref
        if star:
            definite[var] = f"* {name} ( {ref} )"
        elif all(key.startswith("nmod ") for key, _ in args):  # a noun (verbs have roles)
            terms.append((var, len(terms), f"{name} ( {ref} )"))
        for key, value in args:
            arg = visit(value)
            terms.append((var, len(terms), f"{name} . {key} ( {ref} , {arg} )"))
        return ref

    visit(tree)
    body = " AND ".join(text for _, _, text in sorted(terms))
    prefix = " ; ".join(definite[k] for k in sorted(definite))
    return f"{prefix} ; {body}" if prefix and body else prefix or body


def check_round_trip(pairs: Iterable[tuple[Sequence[str], str]], lemmas: dict[str, str]) -> tuple[int, int]:
    """(non-primitive pairs, pairs whose logical form survives the round trip)."""
    total = same = 0
    for sentence, lf in pairs:
        if is_primitive(lf) or len(sentence) == 1:
            continue
        total += 1
        try:
            back = from_variable_free(sentence, to_variable_free(sentence, lf), lemmas)
        except (ValueError, UserError):
            continue
        same += back == lf
    return total, same
