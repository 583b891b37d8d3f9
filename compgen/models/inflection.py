"""Character-level Transformer encoder-decoder for morphological inflection.

The model of Samir & Silfverberg 2023 (their fairseq ``transformer``): post-norm layers,
sinusoidal positions added to embeddings scaled by sqrt(d), separate source and target
embeddings and vocabularies, no final layer norm, a separate output projection. Source
= lemma characters then the tag features as single tokens; target = form characters.
Dropout follows fairseq's three knobs: ``dropout`` on embeddings and residual branches,
``attention_dropout`` on attention weights, ``activation_dropout`` inside the FFN.

:func:`beam_search` is batched beam search with fairseq's scoring: a finished hypothesis
scores (sum of token log-probabilities including EOS) / length; a sentence is done when
``beam`` hypotheses have finished (``compgen.decoding.fairseq_beam``, over the model as a
step function, ``InflectionStepper``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from compgen.configs.defaults import defaults_from
from compgen.configs.stem_corrupt_run import STEM_CORRUPT_PRESET
from compgen.data.vocab import first_seen_tokens
from compgen.decoding.fairseq_beam import FairseqBeamSearch

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)
PAD_ID, BOS_ID, EOS_ID, UNK_ID = range(4)


@dataclass(frozen=True)
@defaults_from(STEM_CORRUPT_PRESET, "model")
class InflectionConfig:
    embed_dim: int
    ffn_dim: int
    heads: int
    encoder_layers: int
    decoder_layers: int
    dropout: float
    attention_dropout: float
    activation_dropout: float
    max_positions: int

    def to_dict(self) -> dict:
        return asdict(self)


class CharVocab:
    """Special tokens (pad, bos, eos, unk) then tokens in first-seen order."""

    def __init__(self, tokens: Sequence[str]):
        if tuple(tokens[:len(SPECIALS)]) != SPECIALS:
            raise ValueError("vocabulary must start with the special tokens")
        self.tokens = list(tokens)
        self.index = {t: i for i, t in enumerate(self.tokens)}

    @classmethod
    def build(cls, sequences) -> CharVocab:
        return cls(first_seen_tokens(SPECIALS, sequences))

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, seq: Sequence[str]) -> list[int]:
        return [self.index.get(t, UNK_ID) for t in seq]

    def decode(self, ids: Sequence[int]) -> list[str]:
        return [self.tokens[i] for i in ids if i >= len(SPECIALS) or i == UNK_ID]


def source_tokens(lemma: str, tags: str) -> list[str]:
    return list(lemma) + [t for t in tags.split(";") if t]


def sinusoidal_table(length: int, dim: int) -> torch.Tensor:
    half = dim // 2
    freq = torch.exp(torch.arange(half, dtype=torch.float32) * -(math.log(10000.0) / (half - 1)))
    angles = torch.arange(length, dtype=torch.float32)[:, None] * freq[None, :]
    table = torch.cat([torch.sin(angles), torch.cos(angles)], dim=1)
    if dim % 2:
        table = torch.cat([table, torch.zeros(length, 1)], dim=1)
    return table


def _set_dropouts(layer: nn.Module, cfg: InflectionConfig) -> None:
    # nn.Transformer*Layer has one dropout value; fairseq has three
    for name in ("self_attn", "multihead_attn"):
        attn = getattr(layer, name, None)
        if attn is not None:
            attn.dropout = cfg.attention_dropout
    layer.dropout = nn.Dropout(cfg.activation_dropout)   # between the two FFN linears


class InflectionTransformer(nn.Module):
    def __init__(self, config: InflectionConfig, src_vocab_size: int, tgt_vocab_size: int):
        super().__init__()
        self.config = config
        d = config.embed_dim
        self.scale = math.sqrt(d)
        self.src_embed = nn.Embedding(src_vocab_size, d, padding_idx=PAD_ID)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d, padding_idx=PAD_ID)
        for emb in (self.src_embed, self.tgt_embed):   # fairseq's embedding init
            nn.init.normal_(emb.weight, mean=0.0, std=d ** -0.5)
            with torch.no_grad():
                emb.weight[PAD_ID].zero_()
        self.register_buffer("positions", sinusoidal_table(config.max_positions, d), persistent=False)
        enc_layer = nn.TransformerEncoderLayer(d, config.heads, config.ffn_dim, config.dropout,
                                               batch_first=True, norm_first=False)
        dec_layer = nn.TransformerDecoderLayer(d, config.heads, config.ffn_dim, config.dropout,
                                               batch_first=True, norm_first=False)
        _set_dropouts(enc_layer, config)
        _set_dropouts(dec_layer, config)
        self.encoder = nn.TransformerEncoder(enc_layer, config.encoder_layers,
                                             enable_nested_tensor=False)
        self.decoder = nn.TransformerDecoder(dec_layer, config.decoder_layers)
        self.embed_dropout = nn.Dropout(config.dropout)
        self.output = nn.Linear(d, tgt_vocab_size, bias=False)
        nn.init.normal_(self.output.weight, mean=0.0, std=d ** -0.5)

    def _embed(self, embedding: nn.Embedding, ids: torch.Tensor) -> torch.Tensor:
        x = embedding(ids) * self.scale + self.positions[: ids.shape[1]]
        return self.embed_dropout(x)

    def encode(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        pad = src.eq(PAD_ID)
        return self.encoder(self._embed(self.src_embed, src), src_key_padding_mask=pad), pad

    def decode(self, memory: torch.Tensor, src_pad: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        """Logits of the next token after every prefix of ``tgt_in`` (starts with BOS)."""
        n = tgt_in.shape[1]
        causal = torch.ones(n, n, dtype=torch.bool, device=tgt_in.device).triu(1)
        h = self.decoder(self._embed(self.tgt_embed, tgt_in), memory, tgt_mask=causal,
                         tgt_key_padding_mask=tgt_in.eq(PAD_ID), memory_key_padding_mask=src_pad)
        return self.output(h)

    def forward(self, src: torch.Tensor, tgt_in: torch.Tensor) -> torch.Tensor:
        memory, pad = self.encode(src)
        return self.decode(memory, pad, tgt_in)


def _split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


def _attend(q, k, v, mask=None) -> torch.Tensor:
    """q [B,h,Q,dh] over k, v [B,h,T,dh]; mask [B,T] True = ignore -> [B,Q,h*dh]."""
    scores = q @ k.transpose(2, 3) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask[:, None, None, :], float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[2], -1)


class IncrementalDecoder:
    """One-token-at-a-time decoding with cached keys/values (eval mode): the same
    function as :meth:`InflectionTransformer.decode`, without recomputing the prefix."""

    def __init__(self, model: InflectionTransformer, memory: torch.Tensor, src_pad: torch.Tensor):
        self.model = model
        self.heads = model.config.heads
        self.pad = src_pad
        d = model.config.embed_dim
        self.memory_kv = []
        for layer in model.decoder.layers:
            w, b = layer.multihead_attn.in_proj_weight, layer.multihead_attn.in_proj_bias
            k = _split_heads(memory @ w[d:2 * d].T + b[d:2 * d], self.heads)
            v = _split_heads(memory @ w[2 * d:].T + b[2 * d:], self.heads)
            self.memory_kv.append((k, v))
        self.cache: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.length = 0

    def reorder(self, rows: torch.Tensor) -> None:
        self.cache = [(k[rows], v[rows]) for k, v in self.cache]
        self.memory_kv = [(k[rows], v[rows]) for k, v in self.memory_kv]
        self.pad = self.pad[rows]

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of the next token given the newest token of every row [B]."""
        m = self.model
        d = m.config.embed_dim
        x = m.tgt_embed(tokens)[:, None, :] * m.scale + m.positions[self.length]
        new_cache = []
        for i, layer in enumerate(m.decoder.layers):
            sa = layer.self_attn
            qkv = x @ sa.in_proj_weight.T + sa.in_proj_bias
            q, k, v = (_split_heads(t, self.heads) for t in qkv.split(d, dim=-1))
            if self.cache:
                k = torch.cat([self.cache[i][0], k], dim=2)
                v = torch.cat([self.cache[i][1], v], dim=2)
            new_cache.append((k, v))
            x = layer.norm1(x + sa.out_proj(_attend(q, k, v)))
            ca = layer.multihead_attn
            q = _split_heads(x @ ca.in_proj_weight[:d].T + ca.in_proj_bias[:d], self.heads)
            mk, mv = self.memory_kv[i]
            x = layer.norm2(x + ca.out_proj(_attend(q, mk, mv, self.pad)))
            x = layer.norm3(x + layer.linear2(layer.activation(layer.linear1(x))))
        self.cache = new_cache
        self.length += 1
        return m.output(x[:, 0])


def pad_batch(seqs: Sequence[Sequence[int]], bos: bool = False, eos: bool = False) -> torch.Tensor:
    rows = [([BOS_ID] if bos else []) + list(s) + ([EOS_ID] if eos else []) for s in seqs]
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def fairseq_search(beam: int) -> FairseqBeamSearch:
    """The reference's beam search (fairseq's) over this model's target vocabulary."""
    return FairseqBeamSearch(beam, BOS_ID, EOS_ID, masked=(PAD_ID, BOS_ID))


class InflectionStepper:
    """The eager model as a step function of the decoding core (``compgen.decoding``):
    ``start(source, copies)`` encodes the sources, each repeated ``copies`` times (one row
    per hypothesis of a beam); ``step`` returns logits (the search normalises them). On a
    GPU the steps run there and the search's bookkeeping stays on the CPU."""

    def __init__(self, model: InflectionTransformer):
        self.model, self.device = model, model.positions.device

    def start(self, source: torch.Tensor, copies: int = 1) -> None:
        # under the caller's grad mode: PyTorch's fused encoder path (no grad) rounds
        # differently from the plain one
        memory, pad = self.model.encode(source.to(self.device))
        self.decoder = IncrementalDecoder(self.model, memory.repeat_interleave(copies, 0),
                                          pad.repeat_interleave(copies, 0))

    @torch.no_grad()
    def step(self, tokens: np.ndarray) -> np.ndarray:
        return self.decoder.step(torch.from_numpy(tokens).to(self.device)).float().cpu().numpy()

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        self.decoder.reorder(torch.from_numpy(rows).to(self.device))


@torch.no_grad()
def beam_search(model: InflectionTransformer, src: torch.Tensor, beam: int = 5,
                max_len: int = 100) -> tuple[list[list[int]], list[float]]:
    """Best hypothesis (token ids without EOS) and its score (mean log-probability per
    token including EOS, natural log) for every row of ``src``."""
    model.eval()
    stepper = InflectionStepper(model)
    stepper.start(src, beam)
    return fairseq_search(beam).best(stepper, src.shape[0], max_len)


@torch.no_grad()
def reference_nll(model: InflectionTransformer, src: torch.Tensor, tgt: Sequence[Sequence[int]]) -> list[float]:
    """Teacher-forced mean negative log-probability per target token (including EOS)."""
    model.eval()
    tgt_in = pad_batch(tgt, bos=True)
    tgt_out = pad_batch(tgt, eos=True)
    logp = torch.log_softmax(model(src, tgt_in).float(), dim=-1)
    tok = logp.gather(2, tgt_out.unsqueeze(2)).squeeze(2)
    mask = tgt_out.ne(PAD_ID)
    return (-(tok * mask).sum(1) / mask.sum(1)).tolist()
