"""The conditional predictor of R&R: an LSTM encoder-decoder with attention, trained on
original + augmented data (reference ``seqseqatt.jl``; the model the paper's numbers are
measured with).

* Encoder: embedding (dropout, then zeroed at <pad>/<unk>) -> one-layer BiLSTM ->
  ``context_j = W_hp [fwd_j ; bwd_j]`` (2H -> H). The decoder starts from the sum of the
  two directions' final (h, c).
* Decoder step: ``x = dropout([embed(y_prev) ; feed])`` -> LSTM cell -> dot attention over
  the contexts (key = linear map of the context, no scaling) -> ``f = dropout(W_c [h ; a])``
  is both the next step's feed and the input of the output layer.
* ``copy = True`` (morphology): the write probability of ``<copy>`` is a gate g and
  ``q(w) = p_gen(w) + g * (sum_j alpha_j [src_j = w] + 1e-7)``. The reference leaves q
  unnormalised and trains on ``log_softmax(log q)``; ``decode_step`` returns exactly that
  normalised distribution, so training, greedy and beam search all read one thing.
* ``copy_sup = True`` (semantic parsing; GECA's ``--copy_sup``, after Finegan-Dollak et
  al. 2018): supervised copying. The ``<copy>`` probability g of the generating softmax
  is a switch and ``q(w) = g * (sum_j alpha_j [src_j = w] + 1e-7) + (1 - g) * p_gen(w)``
  (decoding reads ``log_softmax(log q)``, ``<copy>`` itself masked). Training does not
  use q: every target token that also occurs in the source (``<s>``/``</s>`` left out)
  is rewritten to ``<copy>`` for the generating softmax, and the attention is taught to
  point at it: the loss is the mean NLL of those rewritten targets under ``p_gen`` plus
  the mean NLL of the copyable targets (and ``</s>``, which the source ends with) under
  the normalised copy distribution; other targets carry no copy loss. A source word the
  training outputs never hold (a state name) is produced by pointing at it.

Pieces, top to bottom: config, batch formatting, the model (``encode``, ``decode_step``,
``loss``), then the model as a step function of the decoding core (``PredictorStepper``,
``predictor_rules``, ``predictor_search``; ``run_greedy``, ``run_beam`` and
``search_rows`` run them over any backend's step function; ``greedy_search`` and
``beam_search`` over the eager model), ``predict_sources`` and ``cut_prediction``.

One deliberate difference from the reference: the encoder runs on *packed* sequences, so
a prediction does not depend on how much padding its batch has (the reference runs the
BiLSTM over the padded batch: its backward direction starts on the padding). Predictions
made one by one and in batches are therefore the same.
"""



from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from compgen.configs.sections import known_fields
from compgen.data.vocab import BOS_ID, COPY_ID, EOS_ID, PAD_ID, SEP_ID, SPECIALS, UNK_ID
from compgen.decoding.contract import StepRules
from compgen.decoding.search import BeamSearch, GreedySearch

MASKED = -1e18   # score of a masked position / token (written inline in decode_step:
COPY_EPS = 1e-7  # TorchScript does not read module-level floats)


@dataclass
class Seq2SeqConfig:
    vocab_size: int = 0
    hidden: int = 512     # H
    embed: int = 64       # E
    pdrop: float = 0.5    # dropout on encoder embeddings, decoder input and the feature
    copy: bool = False    # copy from the source (morphology)
    copy_sup: bool = False  # supervised copying (semantic parsing; implies a copy source)
    max_len: int = 45     # longer sources/targets are cut; decoding runs max_len steps

    @classmethod
    def from_dict(cls, d: dict) -> "Seq2SeqConfig":
        return known_fields(cls, d, "seq2seq model option")


class Memory(NamedTuple):
    """What the decoder reads and never changes: computed once per source batch."""
    keys: Tensor         # (B, T, H) attention keys
    context: Tensor      # (B, T, H) attention values
    mask: Tensor         # (B, T) True = a real source position
    source_onehot: Tensor  # (B, T, V) for copying; (B, T, 0) without copy


class State(NamedTuple):
    h: Tensor     # (B, H)
    c: Tensor     # (B, H)
    feed: Tensor  # (B, H) the previous step's feature


def is_real(ids: Tensor) -> Tensor:
    """The reference's mask: a position counts unless it holds <pad> or <unk>."""
    return (ids != PAD_ID) & (ids != UNK_ID)


# ------------------------------------------------------------------ batch formatting

def format_sequence(ids: Sequence[int], max_len: int) -> list[int]:
    """``<s> s </s>``; a sequence longer than max_len keeps its first max_len tokens and
    has no ``</s>`` (as the reference)."""
    if len(ids) > max_len:
        return [BOS_ID] + list(ids[:max_len])
    return [BOS_ID] + list(ids) + [EOS_ID]


def collate(seqs: Sequence[Sequence[int]], max_len: int) -> Tensor:
    rows = [format_sequence(s, max_len) for s in seqs]
    out = torch.full((len(rows), max(len(r) for r in rows)), PAD_ID, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


# ------------------------------------------------------------------ the model

class Seq2Seq(nn.Module):
    def __init__(self, cfg: Seq2SeqConfig):
        super().__init__()
        self.cfg = cfg
        # plain attributes: constants for TorchScript
        self.copy, self.pdrop, self.vocab_size = cfg.copy or cfg.copy_sup, cfg.pdrop, cfg.vocab_size
        self.copy_sup = cfg.copy_sup
        self.copy_id = COPY_ID
        V, E, H = cfg.vocab_size, cfg.embed, cfg.hidden
        # torch's default inits are the reference's: N(0, 1) embeddings, U(+-1/sqrt(H))
        # for every LSTM weight and bias, U(+-1/sqrt(fan_in)) for the dense layers
        self.enc_embed = nn.Embedding(V, E)
        self.dec_embed = nn.Embedding(V, E)
        self.encoder = nn.LSTM(E, H, batch_first=True, bidirectional=True)
        self.project = nn.Linear(2 * H, H)      # [fwd ; bwd] -> context
        self.att_key = nn.Linear(H, H)          # dot attention: h . (W context_j + b)
        self.decoder = nn.LSTMCell(E + H, H)    # input: [embedding ; feed]
        self.combine = nn.Linear(2 * H, H)      # [h ; attended context] -> feature
        self.output = nn.Linear(H, V)

    # -------------------------------------------------------------- encoder
    def encode(self, source: Tensor) -> tuple[Memory, State]:
        """Source ids ``(B, T)`` (``<s> x </s>`` padded) -> Memory and the first State."""
        B, T = source.shape
        real = is_real(source)
        emb = F.dropout(self.enc_embed(source), self.pdrop, self.training) * real[..., None]
        lengths = (source != PAD_ID).sum(1).clamp(min=1).cpu()
        packed = pack_padded_sequence(emb, lengths, batch_first=True, enforce_sorted=False)
        out, (h_n, c_n) = self.encoder(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=T)
        context = self.project(out)
        if self.copy:
            onehot = F.one_hot(source, self.vocab_size).to(context.dtype)
        else:
            onehot = context.new_zeros(B, T, 0)
        memory = Memory(self.att_key(context), context, real, onehot)
        state = State(h_n[0] + h_n[1], c_n[0] + c_n[1], context.new_zeros(B, self.cfg.hidden))
        return memory, state

    # -------------------------------------------------------------- decoder step
    def decode_step(self, token: Tensor, state: State,
                    memory: Memory) -> tuple[Tensor, State, Tensor]:
        """Feed the previous token ``(B,)``; return log p(next token) ``(B, V)``, the new
        State and the attention weights ``(B, T)``. Pure tensor code, no data-dependent
        branches: this is the function the exporters trace."""
        x = torch.cat([self.dec_embed(token), state.feed], dim=1)
        x = F.dropout(x, self.pdrop, self.training)
        h, c = self.decoder(x, (state.h, state.c))
        scores = torch.einsum("bh,bth->bt", h, memory.keys).masked_fill(~memory.mask, -1e18)
        alpha = torch.softmax(scores, dim=1)
        attended = torch.einsum("bt,bth->bh", alpha, memory.context)
        feature = F.dropout(self.combine(torch.cat([h, attended], 1)), self.pdrop, self.training)
        logits = self.output(feature)
        if self.copy_sup:
            p_gen = torch.softmax(logits, dim=1)
            gate = p_gen[:, self.copy_id : self.copy_id + 1]
            p_copy = torch.einsum("bt,btv->bv", alpha, memory.source_onehot) + 1e-7  # COPY_EPS
            logp = torch.log_softmax(torch.log(gate * p_copy + (1 - gate) * p_gen), dim=1)
        elif self.copy:
            p_gen = torch.softmax(logits, dim=1)
            gate = p_gen[:, self.copy_id : self.copy_id + 1]
            p_copy = torch.einsum("bt,btv->bv", alpha, memory.source_onehot) + 1e-7  # COPY_EPS
            logp = torch.log_softmax(torch.log(p_gen + gate * p_copy), dim=1)
        else:
            logp = torch.log_softmax(logits, dim=1)
        return logp, State(h, c, feature), alpha

    # -------------------------------------------------------------- training loss
    def loss(self, source: Tensor, target: Tensor) -> Tensor:
        """Mean token NLL with teacher forcing; targets exclude ``<s>``, include ``</s>``;
        <pad>/<unk> targets carry no loss."""
        memory, state = self.encode(source)
        steps, features, alphas = [], [], []
        for t in range(target.size(1) - 1):
            logp, state, alpha = self.decode_step(target[:, t], state, memory)
            steps.append(logp)
            features.append(state.feed)
            alphas.append(alpha)
        gold = target[:, 1:]
        if self.copy_sup:
            B, S = gold.shape
            rows = torch.arange(B).repeat_interleave(S)
            return supervised_copy_loss(self.output(torch.stack(features, 1).flatten(0, 1)),
                                        torch.stack(alphas, 1).flatten(0, 1),
                                        memory.source_onehot[rows],
                                        source_words(source, self.vocab_size)[rows],
                                        gold.flatten())
        logp = torch.stack(steps, 1)  # (B, T-1, V)
        nll = -logp.gather(2, gold[..., None]).squeeze(2)
        weight = is_real(gold).to(nll.dtype)
        return (nll * weight).sum() / weight.sum().clamp(min=1)


def source_words(source: Tensor, vocab_size: int) -> Tensor:
    """``(B, V)`` True where the source row holds the word (``<s>``, ``</s>``, ``<pad>``
    and ``<unk>`` left out): the targets ``copy_sup`` teaches to copy."""
    content = is_real(source) & (source != BOS_ID) & (source != EOS_ID)
    words = torch.zeros(source.size(0), vocab_size, dtype=torch.bool, device=source.device)
    words.scatter_(1, source.masked_fill(~content, PAD_ID), True)
    words[:, PAD_ID] = False
    return words


def supervised_copy_loss(logits: Tensor, alpha: Tensor, source_onehot: Tensor,
                         in_source: Tensor, gold: Tensor) -> Tensor:
    """The ``copy_sup`` loss (module doc) over P decoder positions: the generating
    softmax's ``logits (P, V)``, the attention ``alpha (P, T)``, each position's source
    one-hot ``(P, T, V)`` and ``source_words`` row ``(P, V)``, the gold tokens ``(P,)``."""
    copyable = in_source.gather(1, gold[:, None]).squeeze(1)
    real = is_real(gold)
    direct = torch.where(copyable, torch.full_like(gold, COPY_ID), gold)
    direct_nll = -torch.log_softmax(logits, 1).gather(1, direct[:, None]).squeeze(1)
    p_copy = torch.bmm(alpha[:, None, :], source_onehot).squeeze(1) + COPY_EPS
    copy_logp = torch.log(p_copy) - torch.log(p_copy.sum(1, keepdim=True))
    copy_nll = -copy_logp.gather(1, gold[:, None]).squeeze(1)
    copied = real & (copyable | (gold == EOS_ID))
    return ((direct_nll * real).sum() / real.sum().clamp(min=1)
            + (copy_nll * copied).sum() / copied.sum().clamp(min=1))


# ------------------------------------------------------------------ search

def predictor_rules(vocab_size: int) -> StepRules:
    """The predictor's step rules: the first step may not emit any special token; later
    steps may not emit <pad>, <unk>, <s> or <copy> (so ``</s>`` can end a sequence); a
    masked entry scores ``MASKED``, as in the reference."""
    return StepRules(vocab_size, BOS_ID, EOS_ID, PAD_ID, SEP_ID,
                     first_step_masked=tuple(range(len(SPECIALS))),
                     later_steps_masked=(PAD_ID, UNK_ID, BOS_ID, COPY_ID), masked_value=MASKED)


def predictor_beam(width: int) -> BeamSearch:
    """The reference's beam search: scores in single precision, a finished hypothesis
    proposes only ``</s>`` at +0."""
    return BeamSearch(width, finished_token=EOS_ID, score_dtype=np.float32)


def predictor_search(beam_width: int = 0) -> GreedySearch | BeamSearch:
    """Greedy search (``beam_width`` <= 1; every row decoded until all have ended, as the
    reference) or ``predictor_beam``."""
    if beam_width > 1:
        return predictor_beam(beam_width)
    return GreedySearch(compact=False, finished_token=EOS_ID)


class PredictorStepper:
    """The eager predictor as a step function of the decoding core (``compgen.decoding``);
    ``record`` (a list) receives every step's attention weights ``(B, T)``."""

    def __init__(self, model: Seq2Seq, record: list | None = None):
        self.model, self.record = model, record
        self.device = next(model.parameters()).device

    @torch.no_grad()
    def start(self, source: Tensor) -> None:
        self.memory, self.state = self.model.encode(torch.as_tensor(source).to(self.device))

    @torch.no_grad()
    def step(self, token: np.ndarray) -> np.ndarray:
        logp, self.state, alpha = self.model.decode_step(
            torch.from_numpy(token).to(self.device), self.state, self.memory)
        if self.record is not None:
            self.record.append(alpha)
        return logp.cpu().numpy()

    def take(self, rows: np.ndarray, memory: bool = True) -> None:
        index = torch.from_numpy(rows).to(self.device)
        self.state = State(*(s[index] for s in self.state))
        if memory:
            self.memory = Memory(*(m[index] for m in self.memory))


def run_greedy(stepper, rules: StepRules, source, max_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Greedy search over a predictor's step function (eager, TorchScript or ONNX Runtime)
    started on source ids ``(B, T)``: tokens ``(B, L)`` (``</s>`` after a row's first one)
    and each token's log p ``(B, L)``."""
    stepper.start(source)
    return predictor_search().best(stepper, rules, len(source), max_len)


def run_beam(stepper, rules: StepRules, source, width: int, max_len: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """``predictor_beam`` over a predictor's step function: the best hypothesis ``(B, L)``
    and its log-probability ``(B,)`` float32."""
    stepper.start(source)
    tokens, _, scores = predictor_beam(width).hypotheses(stepper, rules, len(source), max_len)
    return tokens[:, 0], scores[:, 0]


def search_rows(stepper, rules: StepRules, beam_width: int, max_len: int
                ) -> Callable[[Tensor], list[list[int]]]:
    """``decode(source ids (B, T)) -> rows of output ids``: greedy search, or beam search
    with ``beam_width > 1``, over a predictor's step function."""
    if beam_width > 1:
        return lambda source: run_beam(stepper, rules, source, beam_width, max_len)[0].tolist()
    return lambda source: run_greedy(stepper, rules, source, max_len)[0].tolist()


def greedy_search(model: Seq2Seq, source: Tensor, max_len: int | None = None,
                  return_attention: bool = False):
    """Batched argmax decoding for ``max_len`` steps -> ids ``(B, steps)`` (and, if asked,
    attention ``(B, steps, T)``). Stops early once every row has produced ``</s>``; what
    follows a ``</s>`` is never read (see ``cut_prediction``)."""
    record = [] if return_attention else None
    tokens, _ = run_greedy(PredictorStepper(model, record), predictor_rules(model.vocab_size),
                           source, max_len or model.cfg.max_len)
    ids = torch.from_numpy(tokens).to(source.device)
    return (ids, torch.stack(record, 1)) if return_attention else ids


def beam_search(model: Seq2Seq, source: Tensor, width: int = 4,
                max_len: int | None = None) -> tuple[Tensor, Tensor]:
    """Batched beam search -> best ids ``(B, steps)`` and their log-probabilities ``(B,)``.
    As the reference: the first step expands the start into the top ``width`` tokens, a
    finished beam proposes only ``</s>`` at +0, no length normalisation."""
    tokens, scores = run_beam(PredictorStepper(model), predictor_rules(model.vocab_size), source,
                              width, max_len or model.cfg.max_len)
    return torch.from_numpy(tokens).to(source.device), torch.from_numpy(scores).to(source.device)


def predict_sources(decode: Callable[[Tensor], list[list[int]]], vocab,
                    sources: Sequence[Sequence[str]], batch_size: int, max_len: int
                    ) -> list[list[str]]:
    """Predicted token lists for ``sources`` (token lists); ``decode(source ids (B, T))``
    returns rows of output ids. Sources are batched by length (the encoder is
    batch-independent, so the order does not change a prediction)."""
    ids = [vocab.encode(s) for s in sources]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
    out: list[list[str]] = [[] for _ in ids]
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        rows = decode(collate([ids[i] for i in chunk], max_len))
        for i, row in zip(chunk, rows):
            out[i] = [vocab.tokens[t] for t in cut_prediction(row)]
    return out


def cut_prediction(ids: Sequence[int]) -> list[int]:
    """The reference's trim: cut at the first ``</s>`` or ``<pad>``; a prediction with
    neither (all ``max_len`` steps used) loses its last token."""
    ids = [int(i) for i in ids]
    for k, i in enumerate(ids):
        if i in (EOS_ID, PAD_ID):
            return ids[:k]
    return ids[:-1]
