"""STEM-CORRUPT: the CRP aligner (``aligner``) and stem substitution / pool (``corrupt``)."""

from compgen.augment.stem_corrupt.aligner import AlignerConfig, CrpAligner
from compgen.augment.stem_corrupt.corrupt import (
    StemCorruptConfig,
    corrupt_pair,
    read_triples,
    stem_corrupt_pool,
    stem_of,
    stem_ranges,
    training_alphabet,
    write_triples,
)

__all__ = ["AlignerConfig", "CrpAligner", "StemCorruptConfig", "corrupt_pair", "read_triples",
           "stem_corrupt_pool", "stem_of", "stem_ranges", "training_alphabet", "write_triples"]
