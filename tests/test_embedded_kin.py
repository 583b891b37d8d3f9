"""The kin LM corpus embedded in the package: verified against the shipped sha256 sums,
usable by name (lm/kin) and by lmplz from an empty data folder."""

import pytest

from compgen.data import load_dataset
from compgen.data.sources import checksums, embedded_text, sha256_file
from compgen.errors import UserError
from compgen.lm.kenlm_tools import resolve_corpus


def test_lm_kin_loads_from_an_empty_data_folder(tmp_path):
    table = load_dataset("lm/kin", tmp_path)
    counts = dict(zip(*table.group_by("split").len().sort("split").to_dict(as_series=False).values()))
    assert counts["train"] == 3358 and counts["val"] > 0 and counts["test"] > 0


def test_embedded_copy_is_checked_against_the_shipped_sums():
    assert embedded_text("kin_val.txt", "lm/kin/val.txt")
    with pytest.raises(UserError, match="checksum does not match lm/kin/train.txt"):
        embedded_text("kin_val.txt", "lm/kin/train.txt")  # the val text is not the train file


def test_corpus_file_for_lmplz_is_written_with_the_upstream_checksum(tmp_path):
    for split in ("train", "val", "test"):
        path = resolve_corpus("lm/kin", split, tmp_path)
        assert path == tmp_path / "lm" / "kin" / f"{split}.txt"
        assert sha256_file(path) == checksums()[f"lm/kin/{split}.txt"]
    assert sorted(p.name for p in (tmp_path / "lm" / "kin").iterdir()) == ["test.txt", "train.txt", "val.txt"]


def test_other_lm_corpora_are_not_embedded(tmp_path):
    with pytest.raises(UserError, match="missing; run 'compgen data fetch lm'"):
        resolve_corpus("lm/lao", "train", tmp_path)
