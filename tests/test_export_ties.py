"""Export parity: two backends may order near-tied hypotheses differently (a score gap
below the tolerance); only a real disagreement fails, and its message names the
prototype set, the step, both outputs and the log-prob gap."""

import torch

from compgen.data.vocab import PAD_ID, SEP, Vocab
from compgen.models.recombine import Recombine, RecombineConfig, collate_prototypes
from compgen.runtimes.artifact import parity_failures
from compgen.runtimes.eager import beam_search
from compgen.runtimes.ties import compare_outputs, sequence_logp

WORDS = ["walk", "jump", "run", "twice", "and", "I_WALK", "I_JUMP", "I_RUN"]


def trim(row) -> tuple:
    out = []
    for t in row:
        if t == PAD_ID:
            break
        out.append(t)
    return tuple(out)


def setup():
    torch.manual_seed(0)
    vocab = Vocab.build([WORDS])
    cfg = RecombineConfig(variant="scan", vocab_size=len(vocab), nproto=2, hidden=32, embed=16,
                          attdim=16, zdim=2, kpos=4, outdrop_test=False, max_len=12)
    model = Recombine(cfg).eval()
    tuples = [[["walk", "twice", SEP, "I_WALK", "I_WALK"], ["jump", SEP, "I_JUMP"]],
              [["run", SEP, "I_RUN"], ["walk", "and", "jump", SEP, "I_WALK", "I_JUMP"]]]
    protos = collate_prototypes([[vocab.encode(p) for p in t] for t in tuples], "scan", 12)
    z = torch.zeros(len(tuples), model.latent)
    with torch.no_grad():
        tokens, scores = beam_search(model, protos, 4, 12, z)
    best = [trim(r) for r in tokens[:, 0].tolist()]
    second = [trim(r) for r in tokens[:, 1].tolist()]
    return model, vocab, protos, z, best, second, scores


def test_identical_outputs_pass(one_torch_thread):
    model, vocab, protos, z, best, _, _ = setup()
    found = compare_outputs(model, protos, z, best, list(best), 1e-4, "beam", vocab)
    assert found == {"identical": True, "near_ties": 0, "disagreements": []}


def test_beam_gap_decides_between_near_tie_and_disagreement(one_torch_thread):
    model, vocab, protos, z, best, second, scores = setup()
    other = [best[0], second[1]]           # set 1 decoded as the runner-up hypothesis
    gap = float(scores[1, 0] - scores[1, 1])
    assert gap > 0
    total = sequence_logp(model, protos[[1, 1]], z[[1, 1]], [best[1], second[1]])
    assert abs((total[0] - total[1]) - gap) < 1e-4   # the gap is the eager model's own

    tie = compare_outputs(model, protos, z, best, other, 2 * gap, "beam", vocab)
    assert tie["near_ties"] == 1 and tie["disagreements"] == []

    real = compare_outputs(model, protos, z, best, other, gap / 100, "beam", vocab)
    (d,) = real["disagreements"]
    assert d["set"] == 1 and abs(d["gap"] - gap) < 1e-4
    assert d["step"] == next(t for t, (a, b) in enumerate(zip(best[1], second[1])) if a != b)
    assert d["eager"] == " ".join(vocab.decode(best[1], strip=True))
    assert d["backend"] == " ".join(vocab.decode(second[1], strip=True))

    figures = {"backends": {"onnx": {"greedy_identical": True, "beam_identical": False,
                                     "beam_disagreements": [d], "beam_disagreement_count": 1}}}
    (line,) = parity_failures(figures)
    assert line.startswith("onnx: beam output differs from the eager model's on prototype set 1 "
                           f"from step {d['step']}: eager '{d['eager']}' vs onnx '{d['backend']}'")
    assert f"gap {gap:.2e}" in line
