"""The prototype-based recombination generator of R&R ("learned aug (basic)" with 0
prototypes, recomb-1, recomb-2), one module with two task variants chosen by config.

A generative datum is ``d = x <sep> y``. The model is p(d | d_1..d_K): a BiLSTM encodes
each prototype (one encoder shared by the prototypes), an LSTM decoder attends to every
prototype with separate attention parameters, and can copy tokens out of them.

* ``variant = "scan"``: tied embedding (encoder input, decoder input and, transposed,
  the output layer), tanh attention with relative positions scaled by 1/sqrt(A); copying
  by ONE softmax over [vocabulary logits ; attention scores of every prototype position];
  dropout on embeddings (pdrop), on the hidden state before the output layer (outdrop,
  also at test time when ``outdrop_test``) and on the fed-back feature.
* ``variant = "sig"``: separate embeddings, dot attention, decoder self-attention over
  its own past states, decoder initialised from the prototypes' final states; the output
  mixes writing, copying from the output so far and copying from each prototype: the
  gate is the write probability of ``<copy>``, a softmax over streams splits the copy
  mass among the streams.
* ``vae``: a latent z (2Z dims, von Mises-Fisher posterior with fixed concentration,
  norm uniform) is fed to every decoder step; z = 0 otherwise.

Pieces, top to bottom: config, batch formatting, ``encode`` (prototypes, one by one in
``encode_sequences``, -> Memory and the initial State), ``decode_step`` (one step; the
function the exporters trace; ``decode_step_with_weights`` also returns its attention and
copy weights, for figures) and ``loss`` (teacher forcing); the VAE's vMF pieces are in
``compgen.models.vmf``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from compgen.configs.sections import known_fields
from compgen.data.vocab import BOS_ID, COPY_ID, EOS_ID, PAD_ID, UNK_ID
from compgen.models.attention import MASKED, DotAttention, PositionalAttention
from compgen.models.vmf import sample_vmf_posterior, sample_vmf_prior, vmf_kl


@dataclass
class RecombineConfig:
    variant: str = "scan"       # "scan" | "sig"
    vocab_size: int = 0
    nproto: int = 2             # 0, 1 or 2 prototypes
    copy: bool = True
    vae: bool = False           # False = the reference's kill_edit
    hidden: int = 512           # H
    embed: int = 64             # E
    attdim: int = 128           # A (sig: must equal H)
    zdim: int = 16              # Z; the latent vector has 2Z dimensions
    kpos: int = 16              # relative-position window of the scan attention
    pdrop: float = 0.5
    outdrop: float = 0.7
    outdrop_test: bool = True   # keep outdrop on while sampling (scan reference)
    writedrop: float = 0.5      # training: drop the write index from the copy marginal
    kappa: float = 25.0         # vMF concentration
    max_norm: float = 10.0      # prior norm ~ U(0, max_norm)
    eps: float = 1.0            # posterior norm noise
    max_len: int = 45
    feedcontext: bool = True

    def __post_init__(self):
        if self.variant not in ("scan", "sig"):
            raise ValueError(f"variant must be 'scan' or 'sig', not {self.variant!r}")
        if self.nproto not in (0, 1, 2):
            raise ValueError(f"nproto must be 0, 1 or 2, not {self.nproto}")
        if self.variant == "sig" and self.attdim != self.hidden:
            raise ValueError("the sig attention needs attdim == hidden")

    @classmethod
    def from_dict(cls, d: dict) -> RecombineConfig:
        return known_fields(cls, d, "model option")


class Memory(NamedTuple):
    """Everything the decoder reads that does not change over time."""
    keys: Tensor     # (B, K, T, A) attention keys of the prototype positions
    values: Tensor   # (B, K, T, A)
    tokens: Tensor   # (B, K, T) token ids at those positions (copy sources)
    mask: Tensor     # (B, K, T) bool, True = real token
    z: Tensor        # (B, 2Z) latent (zeros without VAE)


class State(NamedTuple):
    """Decoder state after t steps. ``past_*`` hold the sig self-attention memory
    (length 0 for scan)."""
    h: Tensor         # (B, H)
    c: Tensor         # (B, H)
    feed: Tensor      # (B, F) previous output feature (input feeding)
    step: Tensor      # (B,) long, number of steps taken
    past_h: Tensor    # (B, L, H) decoder states h_0..h_{t-1}
    past_key: Tensor  # (B, L, A) their attention keys
    past_tok: Tensor  # (B, L) the token each of them predicted (<s> for h_0)


class StepWeights(NamedTuple):
    """What one scan decoder step looked at (for figures; never needed to decode)."""
    attention: Tensor  # (B, K, T) softmax of each prototype's attention over its positions
    copy: Tensor       # (B, K, T) joint probability of copying each position (zeros without
    #                    copying); its sum is the copy probability, 1 - sum the write one


def is_real(ids: Tensor) -> Tensor:
    """The reference's mask: a position counts unless it holds <pad> or <unk>."""
    return (ids != PAD_ID) & (ids != UNK_ID)


# ------------------------------------------------------------------ batch formatting

def format_target(ids: Sequence[int], variant: str, max_len: int) -> list[int]:
    """``<s> d </s>``; a datum longer than max_len is cut (sig: and loses its </s>)."""
    if variant == "sig" and len(ids) > max_len:
        return [BOS_ID] + list(ids[:max_len])
    return [BOS_ID] + list(ids[:max_len]) + [EOS_ID]


def format_prototype(ids: Sequence[int], variant: str, max_len: int) -> list[int]:
    """scan: ``p </s>`` (no <s>); sig: ``<s> p`` (no </s>) — as the two references do."""
    if variant == "scan":
        return list(ids[:max_len]) + [EOS_ID]
    return [BOS_ID] + list(ids[:max_len])


def pad_2d(rows: Sequence[Sequence[int]], length: int | None = None) -> Tensor:
    length = max([len(r) for r in rows] + [1]) if length is None else length
    out = torch.full((len(rows), length), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def collate_prototypes(protos: Sequence[Sequence[Sequence[int]]], variant: str,
                       max_len: int) -> Tensor:
    """``protos[b][k]`` token ids -> ``(B, K, T)`` padded to one length over all K."""
    b = len(protos)
    k = len(protos[0]) if b else 0
    rows = [format_prototype(p, variant, max_len) for tup in protos for p in tup]
    if k == 0:
        return torch.zeros((b, 0, 1), dtype=torch.long)
    return pad_2d(rows).view(b, k, -1)


def collate_targets(targets: Sequence[Sequence[int]], variant: str, max_len: int) -> Tensor:
    return pad_2d([format_target(t, variant, max_len) for t in targets])


# ------------------------------------------------------------------ initialisation

def xavier_(t: Tensor) -> Tensor:
    fan_out, fan_in = t.shape[-2], t.shape[-1]
    return nn.init.uniform_(t, -math.sqrt(6 / (fan_in + fan_out)), math.sqrt(6 / (fan_in + fan_out)))


def knet_lstm_init_(lstm: nn.Module) -> None:
    """Knet's default LSTM init: Xavier-uniform per gate matrix, zero biases, forget-gate
    bias 1 in both bias vectors (effective forget bias 2)."""
    with torch.no_grad():
        for name, p in lstm.named_parameters():
            hidden = p.shape[0] // 4
            if name.startswith("weight"):
                for g in range(4):
                    xavier_(p[g * hidden:(g + 1) * hidden])
            else:
                p.zero_()
                p[hidden:2 * hidden] = 1.0


# ------------------------------------------------------------------ the model

class Recombine(nn.Module):
    def __init__(self, cfg: RecombineConfig):
        super().__init__()
        self.cfg = cfg
        # plain attributes (constants for TorchScript)
        self.scan = cfg.variant == "scan"
        self.nproto, self.copy, self.vae = cfg.nproto, cfg.copy, cfg.vae
        self.vocab_size, self.hidden, self.latent = cfg.vocab_size, cfg.hidden, 2 * cfg.zdim
        self.pdrop, self.outdrop, self.outdrop_test = cfg.pdrop, cfg.outdrop, cfg.outdrop_test
        V, E, H, A, K, Zl = cfg.vocab_size, cfg.embed, cfg.hidden, cfg.attdim, cfg.nproto, 2 * cfg.zdim
        feeds = cfg.feedcontext and K > 0

        if self.scan:
            self.embed = nn.Embedding(V, E)
            xavier_(self.embed.weight)
            self.feed_dim = E if feeds else 0
            d_in = E + Zl + self.feed_dim  # z slots are always there (zeros without VAE)
            self.proto_encoder = nn.LSTM(E, H, batch_first=True, bidirectional=True)
            self.decoder = nn.LSTMCell(d_in, H)
            self.attention = PositionalAttention(max(K, 1), 2 * H, H + d_in, A, cfg.kpos)
            self.out = nn.Linear(H + K * A, E)
            xavier_(self.out.weight)
            nn.init.zeros_(self.out.bias)
            for lstm in (self.proto_encoder, self.decoder):
                knet_lstm_init_(lstm)
        else:
            self.enc_embed = nn.Embedding(V, E)
            self.dec_embed = nn.Embedding(V, E)  # N(0, 1) init = torch default
            self.feed_dim = H if feeds else 0
            d_in = E + (Zl if cfg.vae else 0) + self.feed_dim
            self.proto_encoder = nn.LSTM(E, H, batch_first=True, bidirectional=True)
            self.project = nn.Linear(2 * H, H)
            self.decoder = nn.LSTMCell(d_in, H)
            self.attention = DotAttention(max(K, 1), H, A)
            self.self_attention = DotAttention(1, H, A)
            self.combine = nn.Linear(H + (K + 1) * A, H)
            self.output = nn.Linear(H, V)
            self.copygate = nn.Linear(H, K + 1)
            # torch's defaults are the reference's U(+-1/sqrt(fan_in)) / U(+-1/sqrt(H))

        if cfg.vae:  # posterior network q(z | x, prototypes)
            summary = 2 * H if self.scan else H
            self.x_encoder = nn.LSTM(E, H, batch_first=True, bidirectional=True)
            if self.scan:
                knet_lstm_init_(self.x_encoder)
                self.inter_query = nn.Linear(summary, H)
                self.inter_value = nn.Linear(summary, H)
            self.inter_key = nn.Linear(summary, H)
            self.z_emb = nn.Linear(K * H if K > 0 else summary, Zl)

    # -------------------------------------------------------------- encoder
    def encode_sequences(self, seqs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Padded prototypes ``(N, T)`` -> encoder outputs ``(N, T, 2H)`` (sig: projected
        to H) and final states h, c ``(N, H)`` (both directions summed). Every row is
        encoded on its own, unpacked like the reference (the backward direction starts at
        the padding): a prototype's encoding depends on its padded row only, so runtimes
        encode each distinct prototype once."""
        if self.scan:  # pad embeddings are not zeroed (reference); dropout on inputs
            emb = F.dropout(self.embed(seqs), self.pdrop, self.training)
        else:
            emb = self.enc_embed(seqs) * is_real(seqs)[..., None]
            emb = F.dropout(emb, self.pdrop, self.training)
        out, (h_n, c_n) = self.proto_encoder(emb)
        if not self.scan:
            out = self.project(out)
        return out, h_n[0] + h_n[1], c_n[0] + c_n[1]

    def _initial_hc(self, h_fin: Tensor, c_fin: Tensor) -> tuple[Tensor, Tensor]:
        """The decoder's initial (h, c) from the prototypes' final states ``(B, K, H)``:
        their mean (sig), zeros (scan)."""
        if self.scan:
            zeros = torch.zeros(h_fin.size(0), self.hidden, device=h_fin.device)
            return zeros, zeros
        return h_fin.mean(1), c_fin.mean(1)

    def _encode_prototypes(self, protos: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """``(B, K, T)`` -> outputs ``(B, K, T, 2H)`` (sig: projected to H), summaries
        ``(B, K, S)`` for the VAE, and the decoder's initial (h, c) (sig; zeros for scan)."""
        B, K, T = protos.shape
        flat = protos.reshape(B * K, T)
        out, h_fin, c_fin = self.encode_sequences(flat)
        h_fin, c_fin = h_fin.view(B, K, -1), c_fin.view(B, K, -1)
        h0, c0 = self._initial_hc(h_fin, c_fin)
        summary = self._summaries(out, flat, B) if self.scan else h_fin
        return out.view(B, K, T, -1), summary, h0, c0

    def _summaries(self, out: Tensor, flat: Tensor, batch: int) -> Tensor:
        """scan: each prototype's encoder output at its trailing </s> (``(B, K, 2H)``)."""
        last = is_real(flat).sum(1).clamp(min=1) - 1
        return out[torch.arange(flat.size(0)), last].view(batch, flat.size(0) // batch, -1)

    def encode(self, protos: Tensor, z: Tensor, max_steps: int) -> tuple[Memory, State]:
        """Prototypes ``(B, K, T)`` and a latent ``(B, 2Z)`` -> (Memory, initial State).
        ``max_steps`` sizes the sig self-attention buffer."""
        B, K, T = protos.shape
        if K > 0:
            out, h_fin, c_fin = self.encode_sequences(protos.reshape(B * K, T))
            return self.encoded_memory(out.view(B, K, T, -1), h_fin.view(B, K, -1),
                                       c_fin.view(B, K, -1), protos, z, max_steps)
        enc = torch.zeros(B, 0, 1, 1, device=protos.device)
        h0 = c0 = torch.zeros(B, self.hidden, device=protos.device)
        return self._memory(enc, protos, z), self._initial_state(h0, c0, max_steps)

    def encoded_memory(self, enc: Tensor, h_fin: Tensor, c_fin: Tensor, protos: Tensor,
                       z: Tensor, max_steps: int) -> tuple[Memory, State]:
        """``encode`` from the prototypes' ``encode_sequences`` results, gathered per tuple:
        outputs ``(B, K, T, D)``, final states ``(B, K, H)``."""
        h0, c0 = self._initial_hc(h_fin, c_fin)
        return self._memory(enc, protos, z), self._initial_state(h0, c0, max_steps)

    def _memory(self, enc: Tensor, protos: Tensor, z: Tensor) -> Memory:
        if self.nproto > 0:
            keys, values = self.attention.memory(enc)
        else:
            keys = values = enc
        return Memory(keys, values, protos, is_real(protos), z)

    def _initial_state(self, h0: Tensor, c0: Tensor, max_steps: int) -> State:
        B, dev = h0.size(0), h0.device
        L = 0 if self.scan else max_steps + 1
        A = self.hidden if not self.scan else 0
        return State(h0, c0, torch.zeros(B, self.feed_dim, device=dev),
                     torch.zeros(B, dtype=torch.long, device=dev),
                     torch.zeros(B, L, self.hidden if L else 0, device=dev),
                     torch.zeros(B, L, A, device=dev),
                     torch.full((B, L), PAD_ID, dtype=torch.long, device=dev))

    # -------------------------------------------------------------- decoder step
    def decode_step(self, token: Tensor, state: State, memory: Memory) -> tuple[Tensor, State]:
        """Feed the previous token ``(B,)``; return log p(next token) ``(B, V)`` (a
        normalised distribution, copying already marginalised) and the new State."""
        if self.scan:
            joint, state = self._scan_step(token, state, memory)
            return self._marginalise(joint, memory.tokens), state
        return self._sig_step(token, state, memory)

    def decode_step_with_weights(self, token: Tensor, state: State,
                                 memory: Memory) -> tuple[Tensor, State, StepWeights]:
        """``decode_step`` (scan variant) plus what the step attended to, for figures: the
        same computation and the same numbers, with the attention and copy weights kept."""
        if not self.scan:
            raise ValueError("step weights are implemented for the scan variant only")
        joint, state, alpha = self._scan_step_and_attention(token, state, memory)
        B, K, T = memory.tokens.shape
        if joint.size(1) > self.vocab_size:  # copying: joint mass of each prototype position
            copy = joint[:, self.vocab_size:].exp().view(B, K, T)
        else:
            copy = joint.new_zeros(B, K, T)
        return self._marginalise(joint, memory.tokens), state, StepWeights(alpha, copy)

    def _scan_step(self, token: Tensor, state: State, memory: Memory) -> tuple[Tensor, State]:
        """Returns the joint log-softmax over [vocabulary ; every prototype position]
        (``(B, V + K*T)`` with copying, ``(B, V)`` without)."""
        joint, state, _ = self._scan_step_and_attention(token, state, memory)
        return joint, state

    def _scan_step_and_attention(self, token: Tensor, state: State,
                                 memory: Memory) -> tuple[Tensor, State, Tensor]:
        """``_scan_step`` and the attention weights ``(B, K, T)`` of every prototype
        (zeros ``(B, 0, 0)`` without prototypes)."""
        y, scores, alpha, new = self._scan_recurrence(token, state, memory)
        return self._scan_joint(y, scores), new, alpha

    def _scan_joint(self, y: Tensor, scores: Tensor) -> Tensor:
        """Output features ``(..., E)`` and copy scores ``(..., K, T)`` -> the joint
        log-softmax; one call for all steps of a teacher-forced sequence. fp32 also under
        bf16 autocast (sampling graphs): the product is then a sum, which autocast - also
        replaying a traced graph - leaves in fp32 (the vocabulary is small)."""
        if torch.is_autocast_enabled("cpu"):
            y, scores = y.float(), scores.float()
            logits = (y.unsqueeze(-2) * self.embed.weight).sum(-1)
        else:
            logits = y @ self.embed.weight.t()  # tied output layer, no bias
        if self.copy and self.nproto > 0:
            logits = torch.cat([logits, scores.flatten(-2)], -1)
        return torch.log_softmax(logits, dim=-1)

    def _scan_recurrence(self, token: Tensor, state: State,
                         memory: Memory) -> tuple[Tensor, Tensor, Tensor, State]:
        """The recurrent part of a scan step: output feature ``y`` ``(B, E)``, attention
        scores and weights ``(B, K, T)`` and the new State (the output layer is apart)."""
        e = F.dropout(self.embed(token), self.pdrop, self.training)
        parts = [e, memory.z]
        if self.feed_dim > 0:
            parts.append(state.feed)
        inp = torch.cat(parts, dim=1)
        h, c = self.decoder(inp, (state.h, state.c))
        h_out = F.dropout(h, self.outdrop, self.training or self.outdrop_test)
        if self.nproto > 0:
            context, scores, alpha = self.attention(torch.cat([h, inp], 1), memory.keys,
                                                    memory.values, memory.mask, state.step)
            y = self.out(torch.cat([h_out, context.flatten(1)], 1))
        else:
            scores = alpha = memory.keys.new_zeros(h.size(0), 0, 0)
            y = self.out(h_out)
        feed = F.dropout(y, self.pdrop, self.training) if self.feed_dim > 0 else state.feed
        new = State(h, c, feed, state.step + 1, state.past_h, state.past_key, state.past_tok)
        return y, scores, alpha, new

    def _marginalise(self, joint: Tensor, proto_tokens: Tensor) -> Tensor:
        """Joint log-probs ``(B, [L,] V + K*T)`` -> log p(token): the vocabulary entry plus
        every prototype position holding that token."""
        if joint.size(-1) == self.vocab_size:
            return joint
        p = joint.exp()
        sources = proto_tokens.flatten(1)
        if joint.dim() == 3:
            sources = sources[:, None, :].expand(-1, joint.size(1), -1)
        marginal = p[..., : self.vocab_size].scatter_add(-1, sources, p[..., self.vocab_size:])
        return marginal.clamp_min(1e-30).log()

    def _sig_step(self, token: Tensor, state: State, memory: Memory) -> tuple[Tensor, State]:
        L = state.past_tok.size(1)
        # the state entering this step, h_{t-1}, joins the self-attention memory paired
        # with the token it predicted (the one fed now); slot 0 holds h_0 and <s>
        slot = torch.arange(L, device=token.device)[None, :] == state.step[:, None]
        past_h = torch.where(slot[..., None], state.h[:, None, :], state.past_h)
        past_key = torch.where(slot[..., None], self.self_attention.key(state.h[:, None])[:, 0][:, None, :],
                               state.past_key)
        past_tok = torch.where(slot, token[:, None], state.past_tok)
        h, c = self._sig_cell(token, state.feed, state.h, state.c, memory)

        # self-attention over h_1..h_{t-1}; h_0/<s> is masked. Unfilled slots get a lower
        # score than slot 0, so at the first step all weight sits on <s> as in the reference
        pos = torch.arange(L, device=token.device)[None, :]
        self_scores = torch.einsum("bh,blh->bl", h, past_key)
        self_scores = torch.where((pos >= 1) & (pos <= state.step[:, None]), self_scores,
                                  torch.where(pos == 0, torch.full_like(self_scores, MASKED),
                                              torch.full_like(self_scores, 2 * MASKED)))
        logp, f = self._sig_readout(h, self_scores, past_h, past_tok, memory)
        feed = f if self.feed_dim > 0 else state.feed
        return logp, State(h, c, feed, state.step + 1, past_h, past_key, past_tok)

    def _sig_cell(self, token: Tensor, feed: Tensor, h: Tensor, c: Tensor,
                  memory: Memory) -> tuple[Tensor, Tensor]:
        """The sig decoder's LSTM cell fed ``token`` ``(B,)`` (and z, the fed-back feature)."""
        e = self.dec_embed(token) * (token != PAD_ID)[:, None]
        e = F.dropout(e, self.pdrop, self.training)
        parts = [e]
        if self.vae:
            parts.append(memory.z)
        if self.feed_dim > 0:
            parts.append(feed)
        return self.decoder(torch.cat(parts, 1), (h, c))

    def _sig_readout(self, h: Tensor, self_scores: Tensor, past_h: Tensor, past_tok: Tensor,
                     memory: Memory) -> tuple[Tensor, Tensor]:
        """One sig step's log p(next token) ``(B, V)`` and output feature ``(B, H)`` from the
        new state ``h``, the self-attention scores over the ``past_h`` slots (masked
        already) and the tokens paired with them."""
        self_alpha = torch.softmax(self_scores, dim=1)
        self_context = torch.einsum("bl,blh->bh", self_alpha, past_h)
        if self.nproto > 0:
            context, _, alpha = self.attention(h, memory.keys, memory.values, memory.mask)
            feats = torch.cat([h, context.flatten(1), self_context], 1)
        else:
            alpha = memory.keys.new_zeros(h.size(0), 0, 0)
            feats = torch.cat([h, self_context], 1)
        f = F.dropout(self.combine(feats), self.outdrop, self.training)
        return self._sig_distribution(f, h, alpha, self_alpha, past_tok, memory), f

    def _sig_distribution(self, f: Tensor, h: Tensor, alpha: Tensor, self_alpha: Tensor,
                          past_tok: Tensor, memory: Memory) -> Tensor:
        """log p(next token) ``(B, V)`` from the output feature ``f``, the state ``h`` (the
        copy gate reads it), the prototype and self-attention weights and the tokens they
        weigh (copying marginalised)."""
        p = torch.softmax(self.output(f), dim=1)
        if self.copy:
            beta = torch.softmax(self.copygate(h), dim=1)  # (B, K+1) stream weights
            gate = p[:, COPY_ID:COPY_ID + 1]  # write probability of <copy>
            weights = torch.cat([(beta[:, : self.nproto, None] * alpha).flatten(1),
                                 beta[:, self.nproto:] * self_alpha], 1)
            sources = torch.cat([memory.tokens.flatten(1), past_tok], 1)
            p_copy = torch.zeros_like(p).scatter_add(1, sources, weights.to(p.dtype))
            p = p + gate * p_copy + 1e-7
        # <copy> is never emitted; renormalise (the reference leaves the total at ~1)
        p = p.masked_fill(torch.arange(self.vocab_size, device=p.device) == COPY_ID, 0.0)
        p = p / p.sum(1, keepdim=True)
        return p.clamp_min(1e-30).log()

    # -------------------------------------------------------------- VAE
    def posterior_z(self, target: Tensor, protos: Tensor, summaries: Tensor) -> Tensor:
        """Sample z ~ vMF(mu(x, prototypes), kappa) with a uniform-noise norm."""
        x = target[:, 1:]  # without <s>
        emb = (self.embed if self.scan else self.enc_embed)(x)
        if not self.scan:
            emb = emb * is_real(x)[..., None]
        out, (h_n, _) = self.x_encoder(emb)
        if self.scan:
            last = is_real(x).sum(1).clamp(min=1) - 1
            x_emb = out[torch.arange(x.size(0)), last]  # (B, 2H) at </s>
        else:
            x_emb = h_n[0] + h_n[1]  # (B, H)
        if self.nproto == 0:
            mu = self.z_emb(x_emb)
        elif self.scan:  # "feature attention" between x and each prototype summary
            w = torch.softmax(torch.tanh(self.inter_query(x_emb))[:, None]
                              * torch.tanh(self.inter_key(summaries)), dim=-1)
            mu = self.z_emb((torch.tanh(self.inter_value(summaries)) * w).flatten(1))
        else:
            w = torch.softmax(x_emb[:, None] * self.inter_key(summaries), dim=-1)
            mu = self.z_emb((summaries * w).flatten(1))
        return sample_vmf_posterior(mu, self.cfg.kappa, self.cfg.max_norm, self.cfg.eps)

    def prior_z(self, batch: int, device=None) -> Tensor:
        if not self.vae:
            return torch.zeros(batch, self.latent, device=device)
        return sample_vmf_prior(batch, self.latent, self.cfg.max_norm, device)

    def kl(self) -> float:
        """KL(q || prior): a constant for fixed kappa (so it is reported, not trained)."""
        if not self.vae:
            return 0.0
        return vmf_kl(self.cfg.kappa, self.latent) + math.log(self.cfg.max_norm / self.cfg.eps)

    # -------------------------------------------------------------- training loss
    def loss(self, target: Tensor, protos: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Teacher-forced loss of ``target`` ``(B, T)`` (``<s> d </s>``) given prototypes.
        Returns (loss to minimise, summed NLL of the exact marginal, number of tokens).
        scan: summed over tokens / B (with write-drop when training with copying);
        sig: mean over tokens. (:mod:`compgen.models.scan_training` and
        :mod:`compgen.models.sig_training` compute them faster for training.)"""
        B, T = target.shape
        memory, h0, c0 = self._loss_memory(target, protos)
        state = self._initial_state(h0, c0, T)
        gold = target[:, 1:]
        valid = is_real(gold)
        ntok = valid.sum()
        if self.scan:
            ys, scores = self._scan_teacher_forced(target, state, memory)
            return self._scan_objective(ys, scores, memory.tokens, gold, B)
        nll_steps = []
        for t in range(T - 1):
            logp, state = self._sig_step(target[:, t], state, memory)
            nll_steps.append(-logp.gather(1, gold[:, t, None])[:, 0])
        nll = torch.stack(nll_steps, 1) * valid  # (B, T-1)
        return nll.sum() / ntok.clamp(min=1), nll.sum().detach(), ntok

    def _loss_memory(self, target: Tensor, protos: Tensor,
                     encode=None) -> tuple[Memory, Tensor, Tensor]:
        """A teacher-forced loss's memory (z drawn from the posterior with a VAE) and the
        decoder's initial (h, c). ``encode`` stands in for ``_encode_prototypes``."""
        B = target.size(0)
        if self.nproto > 0:
            enc, summaries, h0, c0 = (encode or self._encode_prototypes)(protos)
        else:
            enc = torch.zeros(B, 0, 1, 1, device=target.device)
            summaries = enc.new_zeros(B, 0, 1)
            h0 = c0 = torch.zeros(B, self.hidden, device=target.device)
        z = self.posterior_z(target, protos, summaries) if self.vae else \
            torch.zeros(B, self.latent, device=target.device)
        return self._memory(enc, protos, z), h0, c0

    def _scan_teacher_forced(self, target: Tensor, state: State,
                             memory: Memory) -> tuple[Tensor, Tensor]:
        """Feed ``target[:, :-1]``: output features ``(B, T-1, E)`` and copy scores ``(B,
        T-1, K, T')``. Only the recurrence runs step by step; the output layer, the softmax
        and the losses run once over all steps (``_scan_objective``)."""
        ys, scores = [], []
        for t in range(target.size(1) - 1):
            y, score, _, state = self._scan_recurrence(target[:, t], state, memory)
            ys.append(y)
            scores.append(score)
        return torch.stack(ys, 1), torch.stack(scores, 1)

    def _scan_objective(self, ys: Tensor, scores: Tensor, proto_tokens: Tensor, gold: Tensor,
                        batch: int) -> tuple[Tensor, Tensor, Tensor]:
        """The scan loss of ``loss`` from the output features ``(N, L, E)`` and copy scores
        ``(N, L, K, T)`` of the teacher-forced steps, the gold tokens ``(N, L)`` (<pad> where
        nothing is predicted) and each row's prototype tokens ``(N, K, T)``; divided by
        ``batch`` sequences. The output layer, the softmax and the losses run in fp32."""
        with torch.autocast("cpu", enabled=False):
            joint = self._scan_joint(ys.float(), scores.float())  # (N, L, J)
        valid = is_real(gold)
        if self.copy and self.nproto > 0 and self.training:
            loss = self._writedrop_nll(joint, proto_tokens, gold).sum() / batch
            with torch.no_grad():  # the exact marginal is only reported
                nll = -self._marginalise(joint, proto_tokens).gather(2, gold[..., None])[..., 0]
            return loss, (nll * valid).sum(), valid.sum()
        nll = -self._marginalise(joint, proto_tokens).gather(2, gold[..., None])[..., 0] * valid
        return nll.sum() / batch, nll.sum().detach(), valid.sum()

    def _writedrop_nll(self, joint: Tensor, proto_tokens: Tensor, y: Tensor) -> Tensor:
        """-log of the joint mass on {write index (kept with prob 1 - writedrop)} and every
        prototype position holding y; positions with an empty set contribute 0.
        ``joint`` ``(B, L, V + K*T)``, ``y`` ``(B, L)``."""
        V = self.vocab_size
        keep = torch.rand(y.shape, device=y.device) >= self.cfg.writedrop
        write = F.one_hot(y, V).bool() & (keep & is_real(y))[..., None]
        copy = (proto_tokens.flatten(1)[:, None, :] == y[..., None]) & (y != PAD_ID)[..., None]
        chosen = torch.cat([write, copy], -1)
        lse = torch.logsumexp(joint.masked_fill(~chosen, float("-inf")), dim=-1)
        has = chosen.any(-1)
        return torch.where(has, -lse, torch.zeros_like(lse))
