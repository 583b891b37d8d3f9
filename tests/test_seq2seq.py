"""The conditional predictor: learns, searches consistently in batches, checkpoints round
trip (and resume), the augmentation mixing follows the reference's arithmetic."""

import math

import pytest
import torch

from compgen.cli.common import flag_of
from compgen.data import load_dataset
from compgen.data.vocab import BOS_ID, EOS_ID, Vocab
from compgen.errors import SettingError, UserError
from compgen.models.seq2seq import (
    Memory,
    Seq2Seq,
    Seq2SeqConfig,
    State,
    beam_search,
    collate,
    format_sequence,
    greedy_search,
)
from compgen.training.predictor import (
    MixedStream,
    conditional_pairs,
    epoch_checkpoint,
    evaluate_pairs,
    load_predictor,
    read_predictor,
    save_predictor,
    split_train_dev,
    train_predictor,
)

TINY = {"model": {"hidden": 32, "embed": 16, "pdrop": 0.0, "max_len": 45},
        "train": {"batch_size": 8, "lr": 0.01, "gradnorm": 1.0, "epochs": 2, "patience": 0}}


@pytest.fixture(scope="module")
def jump(data_dir):
    return load_dataset("scan/jump", data_dir)


@pytest.fixture(scope="module")
def vocab(jump):
    return Vocab.build([t for x, y in conditional_pairs(jump) for t in (x, y)])


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _model(vocab, seed=0, **kw):
    torch.manual_seed(seed)
    cfg = {"vocab_size": len(vocab), "hidden": 32, "embed": 16, "pdrop": 0.0, **kw}
    return Seq2Seq(Seq2SeqConfig(**cfg)).eval()


def test_reference_split_and_epoch_arithmetic(jump):
    train, dev = split_train_dev(jump, 0.05, seed=0)
    assert (len(train), len(dev)) == (12543, 660)  # 13 204 unique, floors, one dropped
    assert not {tuple(map(tuple, p)) for p in train} & {tuple(map(tuple, p)) for p in dev}
    stream = MixedStream(train, train[:100], 0.01, seed=0)
    assert stream.batches_per_epoch(len(train), 64) == 197        # floor(12543 / .99 / 64)
    assert MixedStream(train, [], 0.01, 0).batches_per_epoch(len(train), 64) == math.ceil(12543 / 64)
    assert MixedStream(train, train[:100], 0.0, 0).batches_per_epoch(len(train), 64) == math.ceil(12643 / 64)


def test_mixed_stream_draws_augmented_with_probability_p_aug():
    original = [([f"o{i}"], ["O"]) for i in range(50)]
    augmented = [([f"a{i}"], ["A"]) for i in range(7)]
    stream = MixedStream(original, augmented, 0.2, seed=3)
    drawn = [stream.take(64) for _ in range(150)]
    share = sum(y == ["A"] for batch in drawn for _, y in batch) / (150 * 64)
    assert abs(share - 0.2) < 0.02
    # each list is cycled: every original example comes back before any repeats twice
    firsts = [x[0] for batch in drawn for x, y in batch if y == ["O"]][:100]
    assert sorted(firsts[:50]) == sorted(x[0] for x, _ in original) == sorted(firsts[50:100])
    # same seed, same stream; the saved position continues it
    again = MixedStream(original, augmented, 0.2, seed=3)
    assert [again.take(64) for _ in range(150)] == drawn
    state, nxt = stream.state(), stream.take(64)
    again.restore(state)
    assert again.take(64) == nxt


def test_truncation_of_long_sequences():
    assert format_sequence(list(range(10, 60)), 45) == [BOS_ID] + list(range(10, 55))
    assert format_sequence([10, 11], 45) == [BOS_ID, 10, 11, EOS_ID]


@pytest.mark.parametrize("copy", [False, True])
def test_decode_step_is_a_normalised_distribution(vocab, copy):
    model = _model(vocab, copy=copy)
    source = collate([vocab.encode(["jump", "twice"]), vocab.encode(["walk"])], 45)
    memory, state = model.encode(source)
    logp, state, alpha = model.decode_step(torch.tensor([BOS_ID, BOS_ID]), state, memory)
    assert torch.allclose(logp.logsumexp(1), torch.zeros(2), atol=1e-5)
    assert torch.allclose(alpha.sum(1), torch.ones(2), atol=1e-5)
    assert float(alpha[1, 3:].sum().detach()) == 0.0  # padding gets no attention


@pytest.mark.parametrize("copy", [False, True])
def test_batched_search_equals_one_by_one(jump, vocab, copy):
    model = _model(vocab, seed=1, copy=copy)
    xs = [x for x in jump["x"].to_list()[:400:20]]  # 20 commands of different lengths
    assert len({len(x) for x in xs}) > 3
    batch = collate([vocab.encode(x) for x in xs], 45)
    greedy = greedy_search(model, batch, max_len=12)
    beam, beam_scores = beam_search(model, batch, width=3, max_len=12)
    for i, x in enumerate(xs):
        one = collate([vocab.encode(x)], 45)
        g = greedy_search(model, one, max_len=12)[0]
        assert g.tolist() == greedy[i, : len(g)].tolist()
        b, s = beam_search(model, one, width=3, max_len=12)
        assert b[0].tolist() == beam[i, : b.size(1)].tolist()
        assert float(s) == pytest.approx(float(beam_scores[i]), abs=1e-4)
    # beam width 1 is greedy search
    assert beam_search(model, batch, width=1, max_len=12)[0].tolist() == greedy.tolist()


def test_beam_finds_at_least_the_greedy_score(jump, vocab):
    model = _model(vocab, seed=2)
    xs = jump["x"].to_list()[:8]
    source = collate([vocab.encode(x) for x in xs], 45)
    greedy = greedy_search(model, source, max_len=10)
    _, beam_scores = beam_search(model, source, width=4, max_len=10)
    # the greedy path's own score under the same masks and finished-beam rule
    memory, state = model.encode(source)
    token, score = torch.full((len(xs),), BOS_ID), torch.zeros(len(xs))
    done = torch.zeros(len(xs), dtype=torch.bool)
    for t in range(greedy.size(1)):
        logp, state, _ = model.decode_step(token, state, memory)
        token = greedy[:, t]
        score = score + torch.where(done, torch.zeros(()), logp.gather(1, token[:, None]).squeeze(1))
        done = done | (token == EOS_ID)
    assert (beam_scores >= score - 1e-4).all()


def test_tiny_model_overfits_a_handful_of_scan_examples(jump, vocab):
    pairs = [(x, y) for x, y in conditional_pairs(jump) if len(y) <= 6]
    pairs = list({(tuple(x), tuple(y)): (x, y) for x, y in pairs}.values())[:8]
    model = _model(vocab, seed=0)
    assert evaluate_pairs(model, vocab, pairs, morphology=False)["exact_match"] == 0.0
    source = collate([vocab.encode(x) for x, _ in pairs], 45)
    target = collate([vocab.encode(y) for _, y in pairs], 45)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
    for step in range(1, 401):
        model.train()
        loss = model.loss(source, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 25 == 0 and evaluate_pairs(model, vocab, pairs, False)["exact_match"] == 1.0:
            break
    assert evaluate_pairs(model, vocab, pairs, morphology=False)["exact_match"] == 1.0, step


def test_checkpoint_round_trip_and_wrong_kinds(tmp_path, jump, vocab):
    model = _model(vocab, seed=4, copy=True)
    path = tmp_path / "pred.pt"
    save_predictor(path, model, vocab, {"data": "scan/jump", "seed": 4})
    loaded, loaded_vocab, info = load_predictor(path)
    assert loaded_vocab == vocab and info["data"] == "scan/jump" and info["seed"] == 4
    assert loaded.cfg == model.cfg
    for (k, v), (k2, v2) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert k == k2 and torch.equal(v, v2)
    source = collate([vocab.encode(x) for x in jump["x"].to_list()[:5]], 45)
    assert torch.equal(greedy_search(model, source), greedy_search(loaded, source))

    from compgen.training.checkpoint import save_checkpoint

    other = tmp_path / "gen.pt"
    save_checkpoint(other, model, {}, vocab, "recombine")
    with pytest.raises(UserError, match="recombine"):
        load_predictor(other)
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x00" * 20)
    with pytest.raises(UserError, match="not a compgen checkpoint"):
        load_predictor(garbage)


def tiny_data(tmp_path, jump, n: int, max_target: int | None = None):
    """The first ``n`` jump pairs (those with targets up to ``max_target`` tokens) as a
    data file."""
    data = tmp_path / "tiny.txt"
    data.write_text("".join(f"IN: {' '.join(x)} OUT: {' '.join(y)}\n" for x, y in
                            zip(jump["x"].to_list()[:n], jump["y"].to_list()[:n])
                            if max_target is None or len(y) <= max_target))
    return data


def interrupted_run(*args, saves: int = 1, **kw) -> None:
    """train_predictor(*args, **kw), killed right after its ``saves``-th checkpoint write
    (the first: the first epoch's)."""
    import compgen.training.predictor as ts

    class Stop(Exception):
        pass

    real_save, calls = ts.save_predictor, []

    def save_then_stop(path, *a, **k):
        real_save(path, *a, **k)
        calls.append(path)
        if len(calls) == saves:
            raise Stop

    ts.save_predictor = save_then_stop
    try:
        with pytest.raises(Stop):
            train_predictor(*args, **kw)
    finally:
        ts.save_predictor = real_save


def assert_same_weights(path_a, path_b) -> None:
    a, b = load_predictor(path_a)[0], load_predictor(path_b)[0]
    for v, w in zip(a.state_dict().values(), b.state_dict().values()):
        assert torch.allclose(v, w, atol=1e-6)


def test_a_resumed_run_may_change_how_its_loss_is_computed_not_its_settings(tmp_path, jump):
    data = tiny_data(tmp_path, jump, 40)
    out = tmp_path / "p.pt"
    interrupted_run(str(data), TINY, out, seed=1)
    changed = {**TINY, "train": {**TINY["train"], "lr": 0.02}}
    with pytest.raises(UserError, match=r"train.lr 0.01 -> 0.02"):
        train_predictor(str(data), changed, out, seed=1, resume=True)
    reference_loss = {**TINY, "train": {**TINY["train"], "packed_decoder": False}}
    done = train_predictor(str(data), reference_loss, out, seed=1, resume=True)
    assert done["epochs"] == TINY["train"]["epochs"]


def test_train_predictor_writes_a_checkpoint_and_resumes_identically(tmp_path, jump):
    data = tiny_data(tmp_path, jump, 60, max_target=8)
    aug = tmp_path / "aug.tsv"
    aug.write_text("jump twice\tI_JUMP I_JUMP\njump left\tI_TURN_LEFT I_JUMP\n")

    full = train_predictor(str(data), TINY, tmp_path / "full.pt", augment=aug, p_aug=0.3, seed=5)
    assert full["epochs"] == 2 and full["n_augmented"] == 2
    _, _, meta = load_predictor(tmp_path / "full.pt")
    assert meta["p_aug"] == 0.3 and len(meta["curve"]) == 2 and meta["label"] == "aug"
    assert (tmp_path / "full.pt.curve.csv").read_text().startswith("epoch,")

    train_predictor(str(data), TINY, tmp_path / "part.pt", augment=aug, p_aug=0.3, seed=5, epochs=1)
    # an interrupted run: the epoch-1 file still carries the state needed to continue
    assert not read_predictor(tmp_path / "part.pt").optim  # a finished run drops it
    with pytest.raises(UserError, match="cannot resume"):
        train_predictor(str(data), TINY, tmp_path / "part.pt", augment=aug, p_aug=0.3, seed=5,
                        resume=True)

    interrupted_run(str(data), TINY, tmp_path / "resumed.pt", augment=aug, p_aug=0.3, seed=5)
    train_predictor(str(data), TINY, tmp_path / "resumed.pt", augment=aug, p_aug=0.3, seed=5,
                    resume=True)
    assert_same_weights(tmp_path / "full.pt", tmp_path / "resumed.pt")
    meta_a, meta_b = load_predictor(tmp_path / "full.pt")[2], load_predictor(tmp_path / "resumed.pt")[2]
    assert [r["train_loss"] for r in meta_a["curve"]] == pytest.approx(
        [r["train_loss"] for r in meta_b["curve"]], abs=1e-6)


def test_keep_every_leaves_epoch_checkpoints_a_diverged_run_can_go_back_to(tmp_path, jump):
    data = tiny_data(tmp_path, jump, 40)
    three = {**TINY, "train": {**TINY["train"], "epochs": 3}}
    out = tmp_path / "p.pt"
    interrupted_run(str(data), three, out, seed=2, keep_every=2)
    # the curve is written with every epoch's checkpoint, not only at the end
    assert (tmp_path / "p.pt.curve.csv").read_text().count("\n") == 2
    train_predictor(str(data), three, out, seed=2, keep_every=2, resume=True)
    assert sorted(p.name for p in tmp_path.glob("p-ep*.pt")) == ["p-ep2.pt"]
    # back to epoch 2, as after a diverged epoch 3: the run ends where it ended before
    back = tmp_path / "back.pt"
    back.write_bytes(epoch_checkpoint(out, 2).read_bytes())
    assert len(load_predictor(back)[2]["curve"]) == 2
    train_predictor(str(data), three, back, seed=2, resume=True)
    assert_same_weights(out, back)
    meta_a, meta_b = load_predictor(out)[2], load_predictor(back)[2]
    assert [r["train_loss"] for r in meta_a["curve"]] == pytest.approx(
        [r["train_loss"] for r in meta_b["curve"]], abs=1e-6)
    with pytest.raises(SettingError, match="^keep_every ") as refused:
        train_predictor(str(data), three, tmp_path / "x.pt", keep_every=-1)
    assert refused.value.text(flag_of).startswith("--keep-every ")


def test_bad_training_options_are_user_errors(tmp_path):
    with pytest.raises(SettingError, match="^p_aug ") as refused:
        train_predictor("scan/jump", TINY, tmp_path / "x.pt", p_aug=1.0)
    assert refused.value.text(flag_of).startswith("--p-aug ")
    with pytest.raises(UserError, match="preset"):
        train_predictor("scan/jump", "no_such_preset", tmp_path / "x.pt")
    with pytest.raises(UserError, match="unknown"):
        train_predictor("scan/jump", {"train": {"learning_rate": 1}}, tmp_path / "x.pt")
    assert not (tmp_path / "x.pt").exists()


class _Step(torch.nn.Module):
    """decode_step with flat tensor inputs/outputs, the way an exporter wraps it."""

    def __init__(self, model: Seq2Seq):
        super().__init__()
        self.model = model

    def forward(self, token, h, c, feed, keys, context, mask, onehot):
        logp, state, alpha = self.model.decode_step(token, State(h, c, feed),
                                                    Memory(keys, context, mask, onehot))
        return logp, state.h, state.c, state.feed, alpha


@pytest.mark.parametrize("copy", [False, True])
def test_decode_step_compiles_to_torchscript(vocab, copy):
    model = _model(vocab, seed=5, copy=copy)
    source = collate([vocab.encode(["jump", "twice"]), vocab.encode(["walk", "left"])], 45)
    memory, state = model.encode(source)
    args = (torch.tensor([BOS_ID, BOS_ID]), *state, *memory)
    step = _Step(model).eval()
    expected = step(*args)
    for compiled in (torch.jit.script(step), torch.jit.trace(step, args)):
        for got, want in zip(compiled(*args), expected):
            assert torch.allclose(got, want, atol=1e-6)


def test_restore_best_ends_with_the_best_dev_epoch_also_after_a_resume(tmp_path, jump):
    data = tiny_data(tmp_path, jump, 400, max_target=8)
    preset = {"model": TINY["model"],
              "train": {**TINY["train"], "epochs": 5, "dev_fraction": 0.2, "restore_best": True}}
    _, dev = split_train_dev(load_dataset(str(data)), 0.2, 1)

    def final_dev_accuracy(path):
        model, vocab, meta = load_predictor(path)
        return evaluate_pairs(model, vocab, dev, False)["exact_match"], meta["curve"]

    train_predictor(str(data), {**preset, "train": {**preset["train"], "restore_best": False}},
                    tmp_path / "last.pt", seed=1)
    last, curve = final_dev_accuracy(tmp_path / "last.pt")
    best = max(r["dev_exact_match"] for r in curve)
    assert last == curve[-1]["dev_exact_match"] and best > last  # this seed peaks before the end

    train_predictor(str(data), preset, tmp_path / "best.pt", seed=1)
    assert final_dev_accuracy(tmp_path / "best.pt")[0] == best

    # killed after epoch 4, past the best epoch
    interrupted_run(str(data), preset, tmp_path / "resumed.pt", seed=1, saves=4)
    train_predictor(str(data), preset, tmp_path / "resumed.pt", seed=1, resume=True)
    assert_same_weights(tmp_path / "best.pt", tmp_path / "resumed.pt")


def test_augmented_pairs_longer_than_max_len_are_left_out_only_when_asked(tmp_path, jump):
    data = tiny_data(tmp_path, jump, 200, max_target=8)
    fits, too_long = "walk twice\tI_WALK I_WALK", "run thrice\t" + " ".join(["I_RUN"] * 9)
    augment = tmp_path / "augment.tsv"
    augment.write_text(f"{fits}\n{too_long}\n")
    preset = {"model": {**TINY["model"], "max_len": 8}, "train": {**TINY["train"], "epochs": 1}}
    kept = {}
    for drop in (False, True):
        out = tmp_path / f"drop{drop}.pt"
        train_predictor(str(data), {**preset, "train": {**preset["train"],
                                                        "drop_long_augmented": drop}},
                        out, augment=augment, p_aug=0.5, seed=0)
        run = load_predictor(out)[2]
        kept[drop] = (run["n_augmented"], run["n_augmented_too_long"])
    # counted either way (cut, or left out when asked)
    assert kept == {False: (2, 1), True: (1, 1)}
