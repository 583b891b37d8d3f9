"""The greedy outputs a generator export records at export time (``manifest.json``
``load_check``) and that loading it checks again: a few fixed prototype tuples decoded
greedily by model.ts and by the ONNX graphs, each row's tokens and summed log-prob.
Checksums catch damage to files; this catches weights changed with the checksums redone
(a model.ts with noise added and a re-hashed manifest decodes other log-probs)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from compgen.data.vocab import EOS_ID, PAD_ID
from compgen.decoding.contract import prior_z
from compgen.decoding.search import GreedySearch, decode
from compgen.errors import UserError
from compgen.runtimes.artifact import TOLERANCE, load_torchscript, read_prototypes
from compgen.runtimes.manifest import Manifest

CHECK_SETS = 4
BACKENDS = ("torchscript", "onnx")


def finite_weights(model, source) -> None:
    """Refuse a model with NaN or infinite weights (it would export as 'validated')."""
    # start-up: `compgen sample --backend onnx` loads no torch
    import torch

    for name, tensor in model.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise UserError(f"{source}: weight {name} holds NaN or infinite values; "
                            "the checkpoint is broken (a diverged training run?)")


def pad_tuples(tuples: list, nproto: int, batch: int, width: int = 0):
    """Formatted prototype id tuples -> ``(B, K, T)`` (``(B, 0, 1)`` without prototypes);
    T = ``width`` (the contract's prototype width), else the longest prototype."""
    # start-up: `compgen sample --backend onnx` loads no torch
    import torch

    if nproto == 0:
        return torch.zeros((batch, 0, 1), dtype=torch.long)
    length = max([width] + [len(p) for tup in tuples for p in tup])
    out = torch.full((len(tuples), nproto, length), PAD_ID, dtype=torch.long)
    for b, tup in enumerate(tuples):
        for k, p in enumerate(tup):
            out[b, k, : len(p)] = torch.tensor(p)
    return out


def trimmed(tokens: np.ndarray, logp: np.ndarray, eos: int) -> list[tuple[tuple, float]]:
    rows = []
    for row, scores in zip(tokens.tolist(), logp.tolist()):
        end = row.index(eos) + 1 if eos in row else len(row)
        rows.append((tuple(row[:end]), float(sum(scores[:end]))))
    return rows


def run(folder: Path, what: str, call):
    try:
        return call()
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 (foreign graphs fail inside ONNX Runtime/TorchScript)
        reason = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        raise UserError(f"{folder}: {what} does not run on this folder's inputs ({reason})") from None


def greedy_rows(folder: Path, manifest: Manifest, threads: int | None = 1) -> dict:
    """{backend: [(tokens, summed log-prob)] per check tuple}: the first ``CHECK_SETS``
    tuples of prototypes.txt with the prior's latent for seed 0, decoded greedily."""
    # start-up: `compgen sample --backend cpp` loads no ONNX backend
    # start-up: `compgen sample --backend onnx` loads no torch
    from compgen.runtimes.onnx import OnnxGenerator
    from compgen.runtimes.torchscript import TorchScriptGenerator

    contract = run(folder, "manifest.json", manifest.contract)
    nproto = manifest.nproto
    tuples = read_prototypes(folder / "prototypes.txt", nproto)[:CHECK_SETS]
    k = len(tuples) if nproto else CHECK_SETS
    vocab_size = manifest.vocab_size
    for tup in tuples:
        if any(t < 0 or t >= vocab_size for p in tup for t in p):
            raise UserError(f"{folder / 'prototypes.txt'}: token ids outside the vocabulary")
    protos = pad_tuples(tuples, nproto, k, contract.prototype_width).numpy()
    ids = np.arange(k, dtype=np.int64)
    z = prior_z(contract, 0, ids)
    load_torchscript(folder / "model.ts")   # a file that is no TorchScript: one clear line
    rows = {}
    for name, what, backend in (("torchscript", "model.ts", TorchScriptGenerator),
                                ("onnx", "the ONNX graphs", OnnxGenerator)):
        stepper = run(folder, what, lambda backend=backend: backend(folder, manifest, threads).stepper)
        tokens, logp = run(folder, what, lambda stepper=stepper: decode(
            stepper(), contract, protos, z, GreedySearch(), ids))
        rows[name] = trimmed(tokens, logp, EOS_ID)
    return rows


def as_manifest(rows: dict) -> dict:
    """What ``manifest.json`` stores: {backend: [[token ids], log-prob]}."""
    return {name: [[list(tokens), logp] for tokens, logp in backend_rows]
            for name, backend_rows in rows.items()}


def differs(a: float, b: float) -> bool:
    return not (math.isfinite(a) and math.isfinite(b)) or \
        abs(a - b) > TOLERANCE * max(1.0, abs(b)) * 10


def compare_recorded(folder: Path, expected, rows: dict) -> None:
    """Each backend's rows against those recorded at export time: a log-prob that moved
    (the weights changed) is a UserError. Other tokens at an equal log-prob are a near-tie."""
    path = folder / "manifest.json"
    if not isinstance(expected, dict) or set(expected) != set(BACKENDS):
        raise UserError(f"{path}: load_check must hold the rows of {', '.join(BACKENDS)}")
    for name in BACKENDS:
        want = expected[name]
        if not isinstance(want, list) or len(want) != len(rows[name]) or not all(
                isinstance(r, list) and len(r) == 2 and isinstance(r[1], int | float) for r in want):
            raise UserError(f"{path}: load_check.{name} does not fit the check inputs")
        for i, ((_, logp), (_, stored)) in enumerate(zip(rows[name], want)):
            if differs(logp, float(stored)):
                raise UserError(f"{folder}: {name} decodes check input {i} at greedy log-prob "
                                f"{logp:.4f}, recorded at export {float(stored):.4f}; its "
                                "weights are not the exported ones, export it again")
