"""readings(): every bracketing's actions under SCAN's grammar with any nesting."""

from compgen.data.scan_semantics import interpret, readings, some_reading_share


def test_an_ambiguous_command_has_both_readings():
    command = ["walk", "after", "run", "and", "jump"]
    assert readings(command) == {("I_RUN", "I_WALK", "I_JUMP"), ("I_RUN", "I_JUMP", "I_WALK")}
    assert tuple(interpret(command)) in readings(command)


def test_postfix_operators_and_turns():
    assert readings(["turn", "around", "left", "twice"]) == {("I_TURN_LEFT",) * 8}
    assert readings(["jump", "opposite", "right"]) == {("I_TURN_RIGHT", "I_TURN_RIGHT", "I_JUMP")}
    assert readings(["look", "around", "right"]) == {("I_TURN_RIGHT", "I_LOOK") * 4}
    assert readings(["turn", "twice"]) == set() and readings(["walk", "and"]) == set()


def test_share_counts_pairs_with_a_matching_reading():
    pairs = [(["walk", "after", "run", "and", "jump"], ["I_RUN", "I_JUMP", "I_WALK"]),
             (["walk", "twice"], ["I_WALK"])]
    assert some_reading_share(pairs) == 0.5
