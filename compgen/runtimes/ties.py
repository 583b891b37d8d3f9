"""Telling near-ties from disagreements when a backend's decoded outputs are compared with
the eager model's.

Two float implementations of one model round differently (within the parity tolerance).
Where two hypotheses score within that rounding of each other, greedy or beam search may
pick either: a different output there is a near-tie, not a broken export. A difference
counts as a disagreement only when the eager model itself separates the two outputs by
more than the tolerance: for beam search by their total log-probabilities (``tolerance``
per step, as rounding adds up), for greedy decoding by the log-probabilities of the two
tokens at the first step where the outputs part.
"""

from __future__ import annotations

import numpy as np
import torch

from compgen.data.vocab import EOS_ID, Vocab
from compgen.decoding.teacher_forcing import rows_target, teacher_forced_logp


def eager_logp(model, protos: torch.Tensor, z: torch.Tensor, target: torch.Tensor) -> np.ndarray:
    """Per-step log-probabilities ``(B, L-1, V)`` of the eager generator teacher-forced on
    ``target`` (starts with ``<s>``)."""
    with torch.no_grad():
        memory, state = model.encode(protos, z, target.size(1))
        return teacher_forced_logp(lambda token, state: model.decode_step(token, state, memory),
                                   target, state)


def rows_logp(model, protos: torch.Tensor, z: torch.Tensor,
              rows: list[tuple[int, ...]]) -> np.ndarray:
    """Per-step log-probabilities ``(B, L, V)`` of the eager model along ``rows``."""
    return eager_logp(model, protos, z, torch.from_numpy(rows_target(rows)))


def sequence_logp(model, protos, z, rows) -> np.ndarray:
    """Total eager log-probability of each row (its tokens up to and including </s>)."""
    logp = rows_logp(model, protos, z, rows)
    totals = np.zeros(len(rows))
    for b, row in enumerate(rows):
        totals[b] = sum(float(logp[b, t, tok]) for t, tok in enumerate(row))
    return totals


def _first_difference(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    for t, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return t
    return min(len(a), len(b))


def compare_outputs(model, protos: torch.Tensor, z: torch.Tensor, eager: list, other: list,
                    tolerance: float, mode: str, vocab: Vocab) -> dict:
    """Compare a backend's decoded rows with the eager model's (``mode`` greedy | beam).
    Returns ``{"identical", "near_ties", "disagreements"}``; every disagreement names the
    prototype set, the step where the outputs part, both outputs and the log-prob gap."""
    differing = [b for b, (e, o) in enumerate(zip(eager, other)) if e != o]
    result = {"identical": not differing, "near_ties": 0, "disagreements": []}
    if not differing:
        return result
    sub_protos, sub_z = protos[differing], z[differing]
    if mode == "beam":
        rows = [eager[b] for b in differing] + [other[b] for b in differing]
        totals = sequence_logp(model, torch.cat([sub_protos, sub_protos]), torch.cat([sub_z, sub_z]),
                               rows)
        n = len(differing)
        gaps = np.abs(totals[:n] - totals[n:])
        limits = [tolerance * max(len(eager[b]), len(other[b])) for b in differing]
    else:
        logp = rows_logp(model, sub_protos, sub_z, [eager[b] for b in differing])
        gaps, limits = [], []
        for i, b in enumerate(differing):
            t = _first_difference(eager[b], other[b])
            mine = eager[b][t] if t < len(eager[b]) else EOS_ID
            theirs = other[b][t] if t < len(other[b]) else EOS_ID
            step = min(t, logp.shape[1] - 1)
            gaps.append(abs(float(logp[i, step, mine]) - float(logp[i, step, theirs])))
            limits.append(tolerance)
    for i, b in enumerate(differing):
        if gaps[i] <= limits[i]:
            result["near_ties"] += 1
            continue
        result["disagreements"].append({
            "set": b, "step": _first_difference(eager[b], other[b]),
            "eager": " ".join(vocab.decode(eager[b], strip=True)),
            "backend": " ".join(vocab.decode(other[b], strip=True)),
            "gap": float(gaps[i]), "limit": float(limits[i])})
    return result


def describe(backend: str, mode: str, first: dict, count: int = 1) -> str:
    """One line naming a disagreement of ``compare_outputs`` (and how many sets differ)."""
    more = count - 1
    return (f"{backend}: {mode} output differs from the eager model's on prototype set "
            f"{first['set']} from step {first['step']}: eager '{first['eager']}' vs {backend} "
            f"'{first['backend']}', eager log-prob gap {first['gap']:.2e} > {first['limit']:.1e}"
            + (f" (and {more} more sets)" if more > 0 else ""))
