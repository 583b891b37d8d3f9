"""`--rare auto` on the user's own data: the rarest tokens, a whole count level at a time,
while the pairs holding them stay within 1 % of the training pairs. On SCAN it finds what
the earlier rule (each token in at most 1 % of the pairs) found; on GeoQuery's questions
-> SQL, where that rule marked hundreds of tokens (state names, "and", ...) and so filtered
nothing, it finds none and says so; summaries print a count and the first few."""

import json
from collections import Counter

import pytest

from compgen.data import read_data_path
from compgen.data.resample import rare_summary, rare_tokens
from compgen.errors import SettingError
from compgen.neighborhoods.user_data import rare_choice, user_filter

SCAN_TRAIN = ["simple_split/tasks_train_simple.txt", "length_split/tasks_train_length.txt",
              "add_prim_split/tasks_train_addprim_jump.txt",
              "add_prim_split/tasks_train_addprim_turn_left.txt",
              "template_split/tasks_train_template_around_right.txt",
              "template_split/tasks_train_template_right.txt"]


def each_token_rule(pairs, share=0.01):
    """The earlier rule: every token held by at most 1 % of the distinct pairs."""
    distinct = {(tuple(x), tuple(y)) for x, y in pairs}
    limit = max(1, int(share * len(distinct)))
    counts = Counter(t for x, y in distinct for t in set(x) | set(y))
    return sorted(t for t, c in counts.items() if c <= limit)


def geoquery_sql_train(path):
    """GeoQuery's SQL query split, training questions -> SQL (variables filled in)."""
    pairs = []
    for entry in json.loads(path.read_text()):
        if entry["query-split"] != "train":
            continue
        for sentence in entry["sentences"]:
            x, y = sentence["text"], entry["sql"][0]
            for name, value in sentence["variables"].items():
                x, y = x.replace(name, value), y.replace(name, value)
            pairs.append((x.lower().split(), y.split()))
    return pairs


@pytest.mark.parametrize("name", SCAN_TRAIN)
def test_scan_gets_the_same_rare_words_as_before(data_dir, require_data, name):
    table = read_data_path(require_data(data_dir / "scan" / name))
    pairs = list(zip(table["x"].to_list(), table["y"].to_list()))
    found = rare_tokens(pairs)
    assert found == each_token_rule(pairs)
    assert (found == ["I_JUMP", "jump"]) == name.endswith("addprim_jump.txt")


def test_geoquery_sql_has_none_and_sampling_says_so(data_dir, require_data):
    pairs = geoquery_sql_train(require_data(data_dir / "geoquery" / "geography.json"))
    assert len(pairs) == 536
    assert len(each_token_rule(pairs)) > 100   # what the earlier rule marked rare
    assert rare_tokens(pairs) == []
    from compgen.data.table import make_table

    train = make_table([x for x, _ in pairs], [y for _, y in pairs], "train")
    assert rare_choice({}, "auto", train) == []
    with pytest.raises(SettingError, match="auto found no rare token"):
        user_filter({}, train, pairs, "rare", "auto")


def test_a_count_level_that_would_cover_too_many_pairs_is_left_out():
    """225 pairs of common words (each in 15 pairs) and 3 pairs of words of their own: the
    3 hold more than 1 % (2 pairs) together and are not rare; 2 of them are."""
    pairs = [([f"a{j}", f"b{k}"], [f"A{j}", f"B{k}"]) for j in range(15) for k in range(15)]
    pairs += [(["zebra"], ["Z"]), (["yak"], ["Y"]), (["gnu"], ["G"])]
    assert rare_tokens(pairs) == []
    assert each_token_rule(pairs) == ["G", "Y", "Z", "gnu", "yak", "zebra"]
    assert rare_tokens(pairs[:-1]) == ["Y", "Z", "yak", "zebra"]


def test_the_summary_gives_a_count_and_the_first_few():
    assert rare_summary([]) == "none found"
    assert rare_summary(["a", "b"]) == "2: a, b"
    many = [f"t{i:03d}" for i in range(320)]
    line = rare_summary(many)
    assert line.startswith("320: t000, t001, t002, t003, t004, …") and "t005" not in line


def test_sampling_where_auto_finds_none_says_so_and_samples_unfiltered(tmp_path, data_dir,
                                                                         require_data):
    """A generator trained on GeoQuery's SQL questions; its preset samples with the rare
    rule: a warning line, then samples without that rule (it used to filter by 320)."""
    import os
    import subprocess
    import sys

    pairs = geoquery_sql_train(require_data(data_dir / "geoquery" / "geography.json"))
    data = tmp_path / "geo.tsv"
    data.write_text("".join(f"{' '.join(x)}\t{' '.join(y)}\n" for x, y in pairs))
    compgen = [sys.executable, "-m", "compgen"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    model = tmp_path / "g.pt"
    subprocess.run(compgen + ["train", "generator", "--data", str(data), "-o", str(model),
                              "--max-steps", "30", "--hidden", "32", "--embed", "16",
                              "--attdim", "16", "--batch-size", "32", "--threads", "1",
                              "--quiet"], check=True, env=env, capture_output=True, timeout=600)
    from compgen.neighborhoods.user_data import rare_auto_finds_none
    from compgen.training.checkpoint import checkpoint_config

    assert rare_auto_finds_none(checkpoint_config(model, kind="recombine"))
    done = subprocess.run(compgen + ["sample", str(model), "--n", "1", "--nsamples", "20",
                                     "--max-rounds", "4", "--raise-temperature", "--threads",
                                     "1", "--rare", "auto", "--resample", "rare",
                                     "-o", str(tmp_path / "s.tsv")],
                          check=False, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "warning: --rare auto found no rare token" in done.stderr
    assert "with a rare token (none found)" in done.stdout
