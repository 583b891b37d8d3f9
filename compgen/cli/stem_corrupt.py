"""`compgen augment stem-corrupt` and `compgen select`: STEM-CORRUPT pools and the
strategies that choose which synthetic triples to train on."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from compgen.cli.augment import augment_app
from compgen.cli.common import DataDir, console


@augment_app.command("stem-corrupt")
def augment_stem_corrupt(
    lang: str = typer.Argument(..., help="SIGMORPHON language (its train-low file is used) or a lemma<TAB>form<TAB>tags file"),
    output: Path = typer.Option(..., "-o", "--output", help="pool to write (lemma<TAB>form<TAB>tags)"),
    pool: int = typer.Option(10_000, "--pool", help="synthetic triples to make"),
    seed: int = typer.Option(0, "--seed", help="seeds the aligner and the substitution"),
    iterations: int = typer.Option(10, "--iterations", help="Gibbs sweeps of the aligner"),
    compat: bool = typer.Option(False, "--compat/--paper", help="the reference aligner's count quirks and unseeded stream (default: the paper's sampler, seeded)"),
    data_dir: Path | None = DataDir,
) -> None:
    """STEM-CORRUPT: align lemma/form pairs, replace stem characters, write a pool."""
    from compgen.augment.stem_corrupt.aligner import AlignerConfig
    from compgen.augment.stem_corrupt.corrupt import (
        StemCorruptConfig,
        read_triples,
        stem_corrupt_pool,
        training_file,
        write_triples,
    )

    config = StemCorruptConfig(pool_size=pool, seed=seed,
                               aligner=AlignerConfig(iterations=iterations, compat=compat))
    config.validate()
    triples = read_triples(training_file(lang, data_dir))
    start = time.perf_counter()
    with console.status("STEM-CORRUPT ...") as status:
        rows = stem_corrupt_pool(triples, config,
                                 progress=lambda n: status.update(f"STEM-CORRUPT: {n:,}/{pool:,}"))
    write_triples(output, rows)
    console.print(f"wrote {len(rows):,} synthetic triples from {len(triples)} gold ones to {output} "
                  f"in {time.perf_counter() - start:.1f} s", highlight=False, markup=False)
