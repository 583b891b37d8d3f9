"""The sampler runs as asked: no silent temperature rise, a warning with the count when
fewer samples than --n pass the filter, an error when none does; a generator is not
trained from a predictor preset."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from compgen.data.vocab import SEP, Vocab
from compgen.decoding.options import SampleOptions
from compgen.errors import UserError
from compgen.models.recombine import Recombine, RecombineConfig, collate_prototypes
from compgen.runtimes.eager import decode_batch
from compgen.sampling.collection import collect_decoded

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["walk", "jump", "run", "twice", "and", "I_WALK", "I_JUMP", "I_RUN"]
PROTOTYPES = (["walk", "twice", SEP, "I_WALK", "I_WALK"], ["jump", SEP, "I_JUMP"])


def model_and_vocab(outdrop_test=False):
    """An untrained recomb-2 generator (real torch model) over a SCAN-like vocabulary."""
    torch.manual_seed(0)
    vocab = Vocab.build([WORDS])
    cfg = RecombineConfig(variant="scan", vocab_size=len(vocab), nproto=2, hidden=32, embed=16,
                          attdim=16, zdim=2, kpos=4, outdrop_test=outdrop_test)
    return Recombine(cfg).eval(), vocab


def eager_decoder(model, vocab, calls):
    """decode() over the real eager model that records the (strategy, T) of every round."""
    def decode(tuples, strategy, temperature, first):
        calls.append((strategy, temperature))
        protos = collate_prototypes([[vocab.encode(p) for p in t] for t in tuples], "scan", 45)
        out = decode_batch(model, protos, strategy, temperature, 45,
                           sample_ids=first + np.arange(len(tuples)))
        return out.tokens.tolist(), out.scores.tolist()
    return decode


def test_nothing_accepted_is_an_error_and_the_temperature_stays(one_torch_thread):
    model, vocab = model_and_vocab(outdrop_test=False)
    calls, lines = [], []
    torch.manual_seed(0)
    with pytest.raises(UserError, match=r"no sample passed the filter in 12 rounds.*max_rounds"):
        collect_decoded(eager_decoder(model, vocab, calls), vocab, lambda k: [PROTOTYPES] * k,
                        SampleOptions(n=5, strategy="temperature", temperature=1.0, batch_size=4,
                                      max_rounds=12),
                        lambda toks: None, log=lines.append)
    assert len(calls) == 12 and set(calls) == {("temperature", 1.0)}
    assert lines == []


def test_temperature_rises_only_when_asked(one_torch_thread):
    model, vocab = model_and_vocab(outdrop_test=False)
    calls = []
    torch.manual_seed(0)
    with pytest.raises(UserError, match="raised to"):
        collect_decoded(eager_decoder(model, vocab, calls), vocab, lambda k: [PROTOTYPES] * k,
                        SampleOptions(n=5, strategy="greedy", batch_size=4, max_rounds=12,
                                      raise_temperature=True),
                        lambda toks: None, log=lambda line: None)
    assert calls[0] == ("greedy", 1.0) and calls[-1][0] == "mixed" and calls[-1][1] > 1.0


def test_fewer_samples_than_asked_is_a_warning_with_the_count(one_torch_thread):
    model, vocab = model_and_vocab(outdrop_test=False)
    lines, seen = [], set()

    def accept_first_two(tokens):
        key = tuple(tokens)
        if key in seen or len(seen) >= 2:
            return None
        seen.add(key)
        return tokens, []

    torch.manual_seed(0)
    samples = collect_decoded(eager_decoder(model, vocab, []), vocab, lambda k: [PROTOTYPES] * k,
                              SampleOptions(n=50, strategy="temperature", temperature=2.0,
                                            batch_size=8, max_rounds=5),
                              accept_first_two, log=lines.append)
    assert len(samples) == 2
    (warning,) = lines
    assert warning.startswith("warning: 2 of the 50 samples asked for (`n`)")
    assert "`max_rounds` (now 5)" in warning and "`raise_temperature`" in warning
    assert "rounds (temperature sampling at T 2);" in warning


def test_the_warning_names_the_search_that_ran_without_a_temperature(one_torch_thread):
    """Beam search has no temperature: the warning does not quote the preset's."""
    model, vocab = model_and_vocab(outdrop_test=False)
    lines, seen = [], set()

    def accept_first(tokens):
        if seen:
            return None
        seen.add(tuple(tokens))
        return tokens, []

    torch.manual_seed(0)
    collect_decoded(eager_decoder(model, vocab, []), vocab, lambda k: [PROTOTYPES] * k,
                    SampleOptions(n=10, strategy="beam", temperature=0.4, batch_size=4,
                                  max_rounds=3),
                    accept_first, log=lines.append)
    (warning,) = lines
    assert "rounds (beam search);" in warning and "0.4" not in warning


def test_generator_refuses_a_predictor_preset(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "compgen", "train", "generator", "--config",
                           "seq2seq_scan_cpu", "--data", "scan/jump", "-o", str(tmp_path / "g.pt")],
                          capture_output=True, text=True, cwd=ROOT, check=False,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 2, proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.strip()]
    assert line.startswith("error: --config seq2seq_scan_cpu") and "predictor" in line
    assert not (tmp_path / "g.pt").exists()


def test_a_long_run_reports_its_progress(one_torch_thread, monkeypatch):
    from compgen.sampling import collection

    monkeypatch.setattr(collection, "PROGRESS_ROUNDS", 4)
    model, vocab = model_and_vocab(outdrop_test=False)
    lines, seen = [], set()

    def accept_one(tokens):
        if seen:
            return None
        seen.add(tuple(tokens))
        return tokens, []

    torch.manual_seed(0)
    collect_decoded(eager_decoder(model, vocab, []), vocab, lambda k: [PROTOTYPES] * k,
                    SampleOptions(n=3, strategy="temperature", temperature=2.0, batch_size=2,
                                  max_rounds=10),
                    accept_one, log=lines.append)
    assert lines[:2] == ["sampling: 1 of 3 accepted after 4 rounds (at most 10)",
                         "sampling: 1 of 3 accepted after 8 rounds (at most 10)"]
    assert len(lines) == 3 and lines[2].startswith("warning: 1 of the 3 samples asked for")


def test_no_round_cap_decodes_until_nsamples_are_accepted(one_torch_thread, monkeypatch):
    """--max-rounds 0 (the reference's loop): rounds go past the default cap of 200 and
    stop at the round that brings the accepted count to --nsamples, not one later."""
    from compgen.decoding.options import MAX_ROUNDS, NO_ROUND_CAP
    from compgen.sampling import collection

    monkeypatch.setattr(collection, "PROGRESS_ROUNDS", 100)
    model, vocab = model_and_vocab(outdrop_test=False)
    rows_seen = []

    def accept_every_hundredth_row(tokens):
        rows_seen.append(tokens)
        if len(rows_seen) % 100:
            return None
        return [f"x{len(rows_seen)}"], ["y"]   # unique, so every hundredth row counts

    torch.manual_seed(0)
    lines, calls = [], []
    samples = collect_decoded(eager_decoder(model, vocab, calls), vocab,
                              lambda k: [PROTOTYPES] * k,
                              SampleOptions(n=3, nsamples=5, strategy="temperature",
                                            temperature=1.0, batch_size=2,
                                            max_rounds=NO_ROUND_CAP),
                              accept_every_hundredth_row, log=lines.append)
    # 2 rows a round, one in 100 accepted: the 5th comes with row 500, in round 250
    assert len(calls) == 250 > MAX_ROUNDS and len(rows_seen) == 500
    assert len(samples) == 3
    assert lines[:2] == ["sampling: 2 of 5 accepted after 100 rounds (no cap)",
                         "sampling: 4 of 5 accepted after 200 rounds (no cap)"]
    assert not any(line.startswith("warning") for line in lines)
    # the default cap stops the same loop at 200 rounds, short of --nsamples
    rows_seen.clear()
    capped = collect_decoded(eager_decoder(model, vocab, []), vocab, lambda k: [PROTOTYPES] * k,
                             SampleOptions(n=5, nsamples=5, strategy="temperature",
                                           temperature=1.0, batch_size=2),
                             accept_every_hundredth_row, log=lines.append)
    assert len(capped) == 4 and len(rows_seen) == 2 * MAX_ROUNDS
    options = SampleOptions.resolve({}, max_rounds=0)
    assert options.max_rounds == NO_ROUND_CAP
    with pytest.raises(UserError, match="max_rounds must be >= 0"):
        SampleOptions.resolve({}, max_rounds=-1)


def test_the_command_line_names_the_flags_that_help(tmp_path):
    """The library names settings (`max_rounds`); `compgen sample` prints their flags, in
    the shortfall warning and in the error line alike."""
    export = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"
    common = ["-m", "compgen", "sample", str(export), "--max-rounds", "1", "--threads", "1",
              "-o", str(tmp_path / "s.tsv")]
    few = subprocess.run([sys.executable, *common, "--n", "500", "--batch-size", "64",
                          "--strategy", "temperature", "--resample", "none"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert few.returncode == 0, few.stderr
    (warning,) = [line for line in few.stderr.splitlines() if line.startswith("warning:")]
    assert "asked for (--n)" in warning and "--max-rounds (now 1), --raise-temperature" in warning
    none = subprocess.run([sys.executable, *common, "--n", "5", "--batch-size", "1",
                           "--strategy", "greedy", "--resample", "rare", "--rare",
                           "jump twice after walk", "--all-prototypes"],
                          capture_output=True, text=True, timeout=300, check=False)
    assert none.returncode == 2
    assert none.stderr.strip().startswith("error: no sample passed the filter in 1 rounds")
    assert none.stderr.strip().endswith("--max-rounds (now 1), --raise-temperature")
    assert "`" not in few.stderr + none.stderr
