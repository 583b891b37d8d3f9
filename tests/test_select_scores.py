"""`compgen select --scores F`: the scores file records what it was computed from (pool,
scorer, uncertainty mode); a stale file is recomputed with --scorer and refused without
it; --scorer must be an inflection checkpoint even when the scores file is used."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compgen.errors import UserError
from compgen.models.inflection import InflectionConfig
from compgen.pipelines.stem_corrupt import SCORES_HEADER, pool_scores
from compgen.training.inflection import InflectionTrainConfig, train_inflection

ROOT = Path(__file__).resolve().parents[1]
TINY = InflectionConfig(embed_dim=16, ffn_dim=32, heads=2, encoder_layers=1, decoder_layers=1,
                        dropout=0.0, attention_dropout=0.0)
GOLD = [(stem, stem + "en", "V;PL") for stem in ("mak", "sag", "kauf", "frag", "hol", "lern")]
POOL = [(stem, stem + "en", "V;PL") for stem in ("mok", "seg", "kuf", "frog", "hal", "lirn",
                                                 "tak", "bam")]


def compgen(*args):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "compgen", *map(str, args)], capture_output=True,
                          text=True, env=env, check=False)


@pytest.fixture(scope="module")
def scorers(tmp_path_factory):
    folder = tmp_path_factory.mktemp("scorers")
    made = []
    for seed in (0, 1):
        cfg = InflectionTrainConfig(updates=8, warmup=4, validate_every=4, seed=seed, model=TINY)
        train_inflection(GOLD, GOLD[:2], folder / f"m{seed}.pt", cfg, lang="toy")
        made.append(folder / f"m{seed}.pt")
    return made


def test_scores_file_is_keyed_by_its_settings(scorers, tmp_path, one_torch_thread):
    first, second = scorers
    cache = tmp_path / "nll.txt"
    hyp = pool_scores(POOL, first, cache, "hypothesis")
    assert cache.read_text().startswith(SCORES_HEADER)
    assert pool_scores(POOL, None, cache, "hypothesis") == pytest.approx(hyp, abs=1e-6)
    # another mode or another scorer: recomputed, not reused
    ref = pool_scores(POOL, first, cache, "reference")
    assert ref != pytest.approx(hyp, abs=1e-6)
    assert '"uncertainty": "reference"' in cache.read_text().splitlines()[0]
    other = pool_scores(POOL, second, cache, "reference")
    assert other != pytest.approx(ref, abs=1e-6)
    # without a scorer, a file of other settings is refused, naming what differs
    with pytest.raises(UserError, match="uncertainty"):
        pool_scores(POOL, None, cache, "hypothesis")
    with pytest.raises(UserError, match="pool"):
        pool_scores(POOL[:-1], None, cache, "reference")
    legacy = tmp_path / "legacy.txt"
    legacy.write_text("".join(f"{v}\n" for v in hyp))
    with pytest.raises(UserError, match="does not record the settings"):
        pool_scores(POOL, None, legacy, "hypothesis")


def test_select_cli_refuses_stale_scores_and_a_kenlm_scorer(scorers, tmp_path):
    pool = tmp_path / "pool.tsv"
    pool.write_text("".join(f"{a}\t{b}\t{t}\n" for a, b, t in POOL), encoding="utf-8")
    scores = tmp_path / "nll.txt"
    base = ["select", pool, "--strategy", "highloss", "--size", "3", "--scores", scores]
    made = compgen(*base, "--scorer", scorers[0], "-o", tmp_path / "a.tsv")
    assert made.returncode == 0, made.stderr
    stale = compgen(*base, "--uncertainty", "reference", "-o", tmp_path / "b.tsv")
    lines = [line for line in stale.stderr.splitlines() if line.strip()]
    assert stale.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ")
    assert "uncertainty" in lines[0] and "--scorer" in lines[0]
    kenlm_file = tmp_path / "lm.arpa"
    kenlm_file.write_text("\\data\\\nngram 1=1\n\n\\1-grams:\n-1\t<unk>\n\n\\end\\\n")
    wrong = compgen(*base, "--scorer", kenlm_file, "-o", tmp_path / "c.tsv")
    lines = [line for line in wrong.stderr.splitlines() if line.strip()]
    assert wrong.returncode == 2 and len(lines) == 1 and "lm.arpa" in lines[0], wrong.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.tsv", "lm.arpa", "nll.txt",
                                                           "pool.tsv"]
