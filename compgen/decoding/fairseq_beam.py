"""The reference's beam search of the inflection model (fairseq's, Samir & Silfverberg 2023:
beam 5, length penalty 1).

Unlike ``search.BeamSearch``: each step ranks the best ``2 * width`` candidates; an
``</s>`` among the first ``width`` of them finishes a hypothesis, scored by (sum of its
tokens' log-probabilities, ``</s>`` included) / length; the other candidates fill the
``width`` live hypotheses; a source is done once ``width`` hypotheses have finished (or
none is left alive); at ``max_len`` every hypothesis is forced to ``</s>``. The best
finished hypothesis wins. The stepper's scores are normalised here (log-softmax), so a
step function may return logits or log-probabilities; the arithmetic is PyTorch's, as
fairseq's.
"""

from __future__ import annotations

import torch

from compgen.decoding.stepper import Stepper


class FairseqBeamSearch:
    """``width`` hypotheses per source; ``masked`` ids are never emitted."""

    def __init__(self, width: int, bos: int, eos: int, masked: tuple[int, ...]):
        self.width, self.bos, self.eos, self.masked = width, bos, eos, masked

    @torch.no_grad()
    def best(self, stepper: Stepper, n: int, max_len: int) -> tuple[list[list[int]], list[float]]:
        """Best hypothesis (token ids without ``</s>``) and its score for each of ``n``
        sources; the stepper already holds ``width`` rows per source."""
        beam, eos = self.width, self.eos
        tokens = torch.full((n * beam, 1), self.bos, dtype=torch.long)
        scores = torch.zeros(n, beam)
        scores[:, 1:] = float("-inf")          # all beams start identical: expand one
        finished: list[list[tuple[float, list[int]]]] = [[] for _ in range(n)]
        done = torch.zeros(n, dtype=torch.bool)
        for step in range(max_len + 1):
            logits = torch.from_numpy(stepper.step(tokens[:, -1].numpy()))
            logp = torch.log_softmax(logits.float(), dim=-1)
            logp[:, list(self.masked)] = float("-inf")
            if step == max_len:                # force </s> at the length limit
                keep = logp[:, eos].clone()
                logp.fill_(float("-inf"))
                logp[:, eos] = keep
            vocab = logp.shape[1]
            cand = (scores.view(-1, 1) + logp).view(n, beam * vocab)
            top_scores, top_idx = cand.topk(2 * beam, dim=1)
            new_scores = torch.full((n, beam), float("-inf"))
            new_rows = torch.zeros(n, beam, dtype=torch.long)
            new_tokens = torch.full((n, beam), eos, dtype=torch.long)
            length = step + 1
            ts, orig, tok = top_scores.tolist(), (top_idx // vocab).tolist(), (top_idx % vocab).tolist()
            for i in range(n):
                if done[i]:
                    continue
                kept = 0
                for j in range(2 * beam):
                    if ts[i][j] == float("-inf"):
                        break
                    if tok[i][j] == eos:
                        if j < beam:           # fairseq: only </s> among the top beam finish
                            hyp = tokens[i * beam + orig[i][j], 1:].tolist()
                            finished[i].append((ts[i][j] / length, hyp))
                    elif kept < beam:
                        new_scores[i, kept] = ts[i][j]
                        new_rows[i, kept] = i * beam + orig[i][j]
                        new_tokens[i, kept] = tok[i][j]
                        kept += 1
                    if len(finished[i]) >= beam:
                        break
                if len(finished[i]) >= beam or kept == 0:
                    done[i] = True
            if bool(done.all()):
                break
            rows = new_rows.view(-1)
            rows = torch.where(done.repeat_interleave(beam), torch.arange(n * beam), rows)
            tokens = torch.cat([tokens[rows], new_tokens.view(-1, 1)], dim=1)
            stepper.take(rows.numpy())
            scores = new_scores
        best = [max(f, key=lambda t: t[0]) if f else (float("-inf"), []) for f in finished]
        return [hyp for _, hyp in best], [score for score, _ in best]
