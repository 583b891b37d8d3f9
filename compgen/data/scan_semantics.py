"""An interpreter of SCAN commands: the compositional meaning of Lake & Baroni's grammar,
extended to any nesting (conjunctions lowest, left to right; then postfix operators
applied left to right), so commands outside the 20,910 SCAN commands are judged too."""

from __future__ import annotations

from collections.abc import Sequence

PRIMITIVES = {"walk": ["I_WALK"], "look": ["I_LOOK"], "run": ["I_RUN"], "jump": ["I_JUMP"], "turn": []}
TURNS = {"left": "I_TURN_LEFT", "right": "I_TURN_RIGHT"}


def _phrase(tokens: Sequence[str]) -> list[str] | None:
    if not tokens or tokens[0] not in PRIMITIVES:
        return None
    out = list(PRIMITIVES[tokens[0]])
    bare_turn = tokens[0] == "turn"
    i = 1
    while i < len(tokens):
        word = tokens[i]
        if word in ("twice", "thrice") and not bare_turn:
            out = out * (2 if word == "twice" else 3)
            i += 1
        elif word in TURNS:
            out = [TURNS[word]] + out
            i += 1
        elif word in ("opposite", "around") and i + 1 < len(tokens) and tokens[i + 1] in TURNS:
            turn = TURNS[tokens[i + 1]]
            out = [turn, turn] + out if word == "opposite" else ([turn] + out) * 4
            i += 2
        else:
            return None
        bare_turn = False
    return None if bare_turn else out


def interpret(command: Sequence[str]) -> list[str] | None:
    """The action sequence of a command, or None if it is not a SCAN-like command."""
    pieces: list[list[str]] = [[]]
    ops: list[str] = []
    for token in command:
        if token in ("and", "after"):
            ops.append(token)
            pieces.append([])
        else:
            pieces[-1].append(token)
    result = _phrase(pieces[0])
    for op, piece in zip(ops, pieces[1:]):
        actions = _phrase(piece)
        if result is None or actions is None:
            return None
        result = result + actions if op == "and" else actions + result
    return result


def correct_share(pairs) -> float:
    """Share of (command, actions) pairs whose actions are the command's meaning."""
    pairs = list(pairs)
    if not pairs:
        return float("nan")
    return sum(interpret(x) == list(y) for x, y in pairs) / len(pairs)
