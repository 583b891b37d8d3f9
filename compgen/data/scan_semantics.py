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


ATOMS = {("walk",): ("I_WALK",), ("look",): ("I_LOOK",), ("run",): ("I_RUN",), ("jump",): ("I_JUMP",)}
for _word, _turn in TURNS.items():
    ATOMS[("turn", _word)] = (_turn,)
    ATOMS[("turn", "opposite", _word)] = (_turn,) * 2
    ATOMS[("turn", "around", _word)] = (_turn,) * 4


def readings(command: Sequence[str]) -> set[tuple[str, ...]]:
    """Every action sequence of every bracketing of a command under SCAN's grammar with any
    nesting (x and y, x after y, x twice|thrice, x [opposite|around] left|right): a string
    such as "walk after run and jump" has two."""
    command = tuple(command)
    chart: dict[tuple[int, int], set[tuple[str, ...]]] = {}
    n = len(command)
    for width in range(1, n + 1):
        for i in range(n - width + 1):
            j = i + width
            span = command[i:j]
            found = {ATOMS[span]} if span in ATOMS else set()
            last = span[-1]
            if width >= 2 and last in ("twice", "thrice"):
                found |= {a * (2 if last == "twice" else 3) for a in chart[(i, j - 1)]}
            if width >= 2 and last in TURNS:
                turn = TURNS[last]
                found |= {(turn,) + a for a in chart[(i, j - 1)]}
                if width >= 3 and span[-2] == "opposite":
                    found |= {(turn, turn) + a for a in chart[(i, j - 2)]}
                if width >= 3 and span[-2] == "around":
                    found |= {((turn,) + a) * 4 for a in chart[(i, j - 2)]}
            for k in range(i + 1, j - 1):
                if command[k] in ("and", "after"):
                    for a in chart[(i, k)]:
                        for b in chart[(k + 1, j)]:
                            found.add(a + b if command[k] == "and" else b + a)
            chart[(i, j)] = found
    return chart[(0, n)] if n else set()


def some_reading_share(pairs) -> float:
    """Share of (command, actions) pairs whose actions are the meaning of one bracketing of
    the command (a QCFG sample fixes a bracketing that its string does not show)."""
    pairs = list(pairs)
    if not pairs:
        return float("nan")
    return sum(tuple(y) in readings(x) for x, y in pairs) / len(pairs)
