"""The scan generator's teacher-forced training loss, computed without the padding work
and without per-step autograd.

``Recombine.loss`` is the reference computation: every prototype runs through the BiLSTM
over the batch's padded length, every decoder step runs all B rows, finished or not, and
autograd records each step. In SCAN batches two thirds of the encoder steps and half of
the decoder steps are padding. ``training_loss`` computes the same loss with these levers
(``TrainingLoss``):

* distinct prototypes: each distinct prototype of the batch is encoded once (training
  batches repeat prototypes; duplicates then share one dropout mask);
* packed encoder: each direction of the BiLSTM reads each prototype's own tokens only
  (:mod:`compgen.models.packed_lstm`), and the attention keys and values are computed
  at real positions only. The reference's BiLSTM is unpacked, so its backward direction
  starts at the end of the padding: ``pad_chains = 0`` runs it over the full padded
  length as the reference; ``pad_chains = G`` > 0 computes the state after n padding
  steps once for every n, in G chains of dropout masks shared by the batch (the same
  numbers without dropout, i.e. in evaluation; in training, the padding inputs'
  dropout masks are shared by the prototypes of one chain);
* fused decoder: rows sorted by target length leave the decoder once their target has
  ended, and the whole teacher-forced loop is one autograd function
  (:mod:`compgen.models.scan_decoder`).

Each lever but ``pad_chains`` > 0 gives the reference loss and gradients up to float
rounding (tests/test_train_speed.py checks them); the random draws of dropout and write
drop come in another order, so one seed gives another (equally distributed) run.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn

from compgen.data.vocab import PAD_ID
from compgen.models import native, scan_decoder
from compgen.models.packed_lstm import lstm_directions, packed_index, rows_linear
from compgen.models.recombine import Memory, Recombine, is_real
from compgen.models.sig_training import sig_training_loss


@dataclass(frozen=True)
class TrainingLoss:
    """Which levers ``training_loss`` uses (all off: the reference computation)."""
    distinct_prototypes: bool = True
    packed_encoder: bool = True
    pad_chains: int = 0              # 0: the backward direction reads the padding as is
    fused_decoder: bool = True
    native_loops: bool = True        # the step loops compiled (compgen.models.native), if built


REFERENCE = TrainingLoss(False, False, 0, False, False)


def training_loss(model: Recombine, target: Tensor, protos: Tensor,
                  levers: TrainingLoss = TrainingLoss()) -> tuple[Tensor, Tensor, Tensor]:
    """``model.loss(target, protos)`` computed with ``levers`` (scan models with
    prototypes; sig models with any lever on run :mod:`compgen.models.sig_training`;
    the others, and the reference levers, run ``model.loss``)."""
    if levers == REFERENCE or (model.scan and model.nproto == 0):
        return model.loss(target, protos)
    if not model.scan:
        return sig_training_loss(model, target, protos,
                                 native.loops() if levers.native_loops else None)
    B = target.size(0)
    fused = levers.fused_decoder and model.feed_dim > 0
    if fused:  # longest target first: the rows still decoding are a prefix
        order = torch.argsort((target != PAD_ID).sum(1), descending=True, stable=True)
        target, protos = target[order], protos[order]
    loops = native.loops() if levers.native_loops else None
    keys, values, summaries = _encode(model, protos, levers, loops)
    z = model.posterior_z(target, protos, summaries) if model.vae else torch.zeros(B, model.latent)
    memory = Memory(keys, values, protos, is_real(protos), z)
    gold = target[:, 1:]
    if not fused:
        state = model._initial_state(torch.zeros(B, model.hidden), torch.zeros(B, model.hidden), 0)
        ys, scores = model._scan_teacher_forced(target, state, memory)
        return model._scan_objective(ys, scores, protos, gold, B)
    # packed steps: step t runs the rows whose target has a token to predict at t
    lengths = (gold != PAD_ID).sum(1)
    running = (lengths[None, :] > torch.arange(int(lengths[0]))[:, None]).sum(1)
    step = torch.repeat_interleave(torch.arange(running.size(0)), running)
    row = torch.arange(step.size(0)) - torch.repeat_interleave(running.cumsum(0) - running, running)
    fed = scan_decoder.dropout(model.embed(target[row, step]), model.pdrop, model.training)
    ys, scores = scan_decoder.fused_decoder(model, fed, z, row, keys, values, memory.mask, running.tolist(),
                               loops)
    return model._scan_objective(ys[:, None], scores[:, None], protos[row],
                                 gold[row, step][:, None], B)


# ------------------------------------------------------------------ encoder

def _encode(model: Recombine, protos: Tensor, levers: TrainingLoss,
            loops=None) -> tuple[Tensor, Tensor, Tensor]:
    """Prototypes ``(B, K, T)`` -> attention keys and values ``(B, K, T, A)`` and the
    summaries ``(B, K, 2H)`` (encoder outputs at the trailing </s>, for the VAE). With the
    packed encoder, keys and values at padding positions are zeros (the attention masks
    them; the reference computes them from the padding's encoder outputs)."""
    B, K, T = protos.shape
    flat = protos.reshape(B * K, T)
    if levers.distinct_prototypes:
        rows, inverse = torch.unique(flat, dim=0, return_inverse=True)
    else:
        rows, inverse = flat, torch.arange(B * K)
    if not levers.packed_encoder:
        enc, _, _, _ = model._encode_prototypes(rows[:, None, :])
        enc = enc[inverse].view(B, K, T, -1)
        keys, values = model.attention.memory(enc)
        return keys, values, model._summaries(enc.view(B * K, T, -1), flat, B)
    lengths = (rows != PAD_ID).sum(1)  # padding only trails
    order = torch.argsort(lengths, descending=True, stable=True)
    rows, lengths, inverse = rows[order], lengths[order], torch.argsort(order)[inverse]
    index, enc = _packed_bilstm(model, rows, lengths, levers.pad_chains, loops)
    # keys and values of both memories at every real position in one product
    att, N, A = model.attention, rows.size(0), model.attention.att_dim
    weight = torch.cat([att.key.weight, att.value.weight])  # (2K, A, 2H)
    bias = torch.cat([att.key.bias, att.value.bias])
    memories = torch.tanh(rows_linear(enc, weight.reshape(2 * K * A, -1), bias.reshape(-1)))
    grid = memories.new_zeros(N * T, 2 * K * A).index_put((index,), memories)
    # (B, K) -> its prototype's row, read with the prototype slot's parameters
    chosen = grid.view(N, T, 2, K, A)[inverse.view(B, K), :, :, torch.arange(K)]  # (B, K, T, 2, A)
    summaries = protos.new_zeros(B, K, 0)
    if model.vae:  # the output at the last real token, as Recombine._summaries
        position = torch.full((N * T,), -1).index_put((index,), torch.arange(index.size(0)))
        last = is_real(rows).sum(1).clamp(min=1) - 1
        summaries = enc[position[torch.arange(N) * T + last]][inverse].view(B, K, -1)
    return chosen[..., 0, :], chosen[..., 1, :], summaries


def _packed_bilstm(model: Recombine, tokens: Tensor, lengths: Tensor,
                   pad_chains: int, loops) -> tuple[Tensor, Tensor]:
    """The prototype BiLSTM over ``tokens`` ``(N, T)`` sorted by ``lengths`` (longest first).
    Returns the flat index (row * T + position) of every real position, in the packed
    order of the forward direction, and the outputs ``(P, 2H)`` there."""
    lstm = model.proto_encoder
    N, T = tokens.shape
    emb = scan_decoder.dropout(model.embed(tokens).reshape(N * T, -1), model.pdrop, model.training)
    forward, backward = _direction_weights(lstm, ""), _direction_weights(lstm, "_reverse")
    index, batch_sizes = packed_index(lengths, T)
    if pad_chains == 0:  # the backward direction reads the padding first, as the reference
        (h_forward,), _ = lstm_directions([emb[index]], batch_sizes, [forward], native=loops)
        back_index, back_sizes = packed_index(torch.full_like(lengths, T), T)
        back_index = back_index + T - 1 - 2 * (back_index % T)  # step t reads position T-1-t
        (h_back,), _ = lstm_directions([emb[back_index]], back_sizes, [backward], native=loops)
    else:  # ... from the state after its padding, shared by the prototypes of a chain;
        # both directions then run the same steps, in one loop
        row, step = index // T, index % T
        back_index = row * T + lengths[row] - 1 - step  # step t reads position length-1-t
        start = _pad_chain_states(model, backward, T - lengths, pad_chains, loops)
        (h_forward, h_back), _ = lstm_directions([emb[index], emb[back_index]], batch_sizes,
                                                 [forward, backward], [None, start], loops)
    # the backward direction's output at each forward-packed position
    position = torch.empty(N * T, dtype=torch.long).index_put_((back_index,), torch.arange(back_index.size(0)))
    return index, torch.cat([h_forward, h_back[position[index]]], 1)


def _direction_weights(lstm: nn.LSTM, suffix: str) -> list[Tensor]:
    return [getattr(lstm, f"{name}_l0{suffix}")
            for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


def _pad_chain_states(model: Recombine, weights: list[Tensor], pads: Tensor,
                      chains: int, loops=None) -> tuple[Tensor, Tensor]:
    """The backward direction's (h, c) after ``pads[i]`` padding steps for each row i, from
    ``chains`` chains of padding inputs (row i reads chain i mod ``chains``)."""
    steps = int(pads.max())
    pad = model.embed.weight[PAD_ID]
    inputs = scan_decoder.dropout(pad.expand(steps * chains, -1), model.pdrop, model.training)
    (hs,), (cs,) = lstm_directions([inputs], [chains] * steps, [weights], native=loops)
    zeros = hs.new_zeros(chains, hs.size(1))
    at = pads * chains + torch.arange(pads.size(0)) % chains  # after pads[i] steps of chain i
    return torch.cat([zeros, hs])[at], torch.cat([zeros, cs])[at]
