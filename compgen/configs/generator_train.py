"""``[train]`` of a generator preset: the Recombine training regime (spec §4)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GeneratorTrainConfig:
    batch_size: int = 32
    lr: float = 0.002
    gradnorm: float = 0.0            # global L2 clip; 0 = off
    epochs: int = 1
    dev_fraction: float = 0.1        # scan: the part of the neighbourhoods held out as dev
    patience: int = 4                # epochs without dev improvement before lr *= lrdecay
    lrdecay: float = 0.5
    restore_best: bool | None = None  # best-dev weights at the end; None = on for scan only
    seed: int = 0                    # initialisation, batch order, dev split
    threads: int | None = None       # torch CPU threads; None = the cores this process may use
    log_every: int = 50              # updates per loss-curve row
    checkpoint_seconds: float = 120.0  # seconds between resumable checkpoints
    # batches per length-sorted pool; 0 = plain shuffled batches. Off by default: 1.7-2.1x
    # faster, but the loss after the first updates is 8-14 % higher (docs/results.md)
    length_buckets: int = 0
    # how the scan loss is computed (compgen/models/scan_training.py); each lever gives the
    # reference loss and gradients, but pad_chains > 0 shares the dropout masks of the
    # prototypes' padding within a batch. Each prototype's padding masks are still drawn
    # Bernoulli(1 - p), so the expected loss is the reference's; only their noise is
    # shared across a chain. 4 chains: 1.3x per H 512 update (docs/results.md); 0 draws
    # every prototype's padding masks, as the reference
    unique_prototypes: bool = True   # encode each distinct prototype of a batch once
    packed_encoder: bool = True      # the prototype BiLSTM skips the padding it can skip
    pad_chains: int = 4              # > 0: the padding's states from this many shared chains
    fused_decoder: bool = True       # the teacher-forced decoder loop as one autograd function
    native_loops: bool = True        # its step loops compiled for this CPU (compgen.models.native)
    prefetch: bool = True            # collate the next batch while the current one trains
    precision: str = "auto"          # auto (bf16 where the CPU has bf16 units) | fp32 | bf16
    # the user's own data (not SCAN/SIGMORPHON): compgen.neighborhoods.generic
    neighborhood: str = "long-short"  # long-short | long-long
    similarity: str = "levenshtein"   # levenshtein | jaccard (token sets)
    max_missing: int = 2              # long-long: token types a first prototype may lack

    def __post_init__(self):
        for name in ("batch_size", "epochs", "patience", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1 (got {getattr(self, name)})")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1 (got {self.threads})")
        if self.length_buckets < 0 or self.pad_chains < 0:
            raise ValueError(f"length_buckets and pad_chains must be >= 0 (got "
                             f"{self.length_buckets}, {self.pad_chains})")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision must be auto, fp32 or bf16 (got {self.precision!r})")
        if self.neighborhood not in ("long-short", "long-long"):
            raise ValueError(f"neighborhood must be long-short or long-long (got "
                             f"{self.neighborhood!r})")
        if self.similarity not in ("levenshtein", "jaccard"):
            raise ValueError(f"similarity must be levenshtein or jaccard (got {self.similarity!r})")
        if self.max_missing < 1:
            raise ValueError(f"max_missing must be >= 1 (got {self.max_missing})")
        if not 0.0 <= self.dev_fraction < 1.0:
            raise ValueError(f"dev_fraction must be in [0, 1) (got {self.dev_fraction})")
        if self.lr <= 0 or self.lrdecay <= 0 or self.gradnorm < 0 or self.checkpoint_seconds < 0:
            raise ValueError("lr and lrdecay must be > 0, gradnorm and checkpoint_seconds >= 0")
