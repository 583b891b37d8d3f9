"""The export kind of a recombination generator ("recombine"; ``GeneratorExport``), also of
a generator export folder (exported again in the current format: same weights, same
prototype order). The steps every kind shares are in ``spec.py``, the folder format in
``artifact.py``.

A generator's folder holds
* ``model.ts``: TorchScript module with the sampler's graphs (prototype encoder, encoder,
  decoder step; the decode loop around them is the manifest's contract);
* ``prototypes.onnx``, ``encoder.onnx`` and ``decoder_step.onnx``: the same three graphs
  for ONNX Runtime, dynamic batch and length axes, checked by ``onnx.checker``;
* no separate eager weights: ``--backend torch`` rebuilds the eager model from the
  manifest's config and the weights inside ``model.ts`` (one fp32 copy fewer);
* ``vocab.json`` (and ``vocab.txt``, one token per line, for the C++ runner);
* ``prototypes.txt``: the sampling-time prototype tuples (Omega) of the training data,
  shuffled once, as token ids already formatted for the model (one tuple per line, K
  tab-separated fields); every runtime cycles through it; ``prototypes.CUT.txt``: the
  same for Omega's other length cuts (SCAN and user data: ``--prototype-cut CUT``), listed
  in the manifest's ``decoding.prototype_cuts``;
* ``manifest.json``: model kind and config, vocabulary size, opset, graph inputs and
  outputs with dynamic axes, the decoding contract, sha256 of every file, and the
  parity figures measured before the artifact was written.

Export validates first, in a temporary folder: greedy and beam outputs of every exported
backend must equal the eager model's on ``parity_sets`` prototype sets (near-ties within
the tolerance are not failures), and the per-step log-probabilities must agree within
the tolerance, relative to |log p|. A failed check raises an error and
no artifact is written. Exported graphs are deterministic: test-time dropout
(``outdrop_test``) is off; sampling randomness lives in the runtimes.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl
import torch

from compgen.data.vocab import EOS_ID, PAD_ID, Vocab
from compgen.decoding.contract import Contract
from compgen.decoding.options import PROTOTYPE_CUTS
from compgen.decoding.search import BeamSearch, GreedySearch, decode
from compgen.decoding.teacher_forcing import rows_target
from compgen.errors import SettingError
from compgen.export.spec import ExportOptions, KindSpec, ParityOutputs, ParityRun
from compgen.io import write_samples_tsv
from compgen.models.recombine import format_prototype
from compgen.neighborhoods.omega_source import prototype_source
from compgen.neighborhoods.user_data import export_prototype_options, training_table
from compgen.runtimes.artifact import (
    LOGP_FLOOR,
    TRAINING_PAIRS,
    eager_model,
    load_manifest,
    read_prototypes,
    write_vocab,
)
from compgen.runtimes.cpp import decode_with_runner
from compgen.runtimes.eager import BEAM_WIDTH, beam_search, decode_batch
from compgen.runtimes.graphs import deterministic
from compgen.runtimes.manifest import PROTOTYPE_FILE, Manifest, cut_file
from compgen.runtimes.onnx import OnnxGenerator
from compgen.runtimes.onnx_export import GENERATOR_GRAPHS, OPSET, export_onnx
from compgen.runtimes.recorded_outputs import as_manifest, finite_weights, greedy_rows, pad_tuples
from compgen.runtimes.ties import compare_outputs, eager_logp
from compgen.runtimes.torchscript import TorchScriptGenerator
from compgen.runtimes.torchscript_trace import export_torchscript
from compgen.training.checkpoint import load_generator

MAX_PROTOTYPES = 100_000  # cap on the stored prototype list (Omega can have millions)


def write_training_pairs(path: Path, table) -> None:
    """The data set's training pairs (x, y, tokens space-joined) as a samples TSV."""
    train = table.filter(pl.col("split") == "train")
    write_samples_tsv(path, zip(train["x"].to_list(), train["y"].to_list()))


def write_prototypes(path: Path, tuples, vocab: Vocab, variant: str, max_len: int) -> int:
    with open(path, "w", encoding="utf-8") as f:
        for tup in tuples:
            fields = [" ".join(map(str, format_prototype(vocab.encode(p), variant, max_len)))
                      for p in tup]
            f.write("\t".join(fields) + "\n")
    return len(tuples)


def _trim(tokens: np.ndarray) -> list[tuple[int, ...]]:
    """Rows of ids -> tuples up to and including </s> (pads dropped)."""
    rows = []
    for row in (tokens.tolist() if isinstance(tokens, np.ndarray) else tokens):
        out = []
        for t in row:
            if t == PAD_ID:
                break
            out.append(t)
            if t == EOS_ID:
                break
        rows.append(tuple(out))
    return rows


def _eager_parity(model, protos: torch.Tensor, z: torch.Tensor, width: int, max_len: int):
    """The eager model's greedy and beam outputs, and its per-step log-probs teacher-forced
    on the greedy rows: (outputs, target, the steps compared)."""
    with torch.no_grad():
        greedy = _trim(decode_batch(model, protos, "greedy", 1.0, max_len, z).tokens.numpy())
        best = _trim(beam_search(model, protos, width, max_len, z)[0][:, 0].numpy())
    # teacher-force the eager greedy outputs (padded) through every backend
    target = torch.from_numpy(rows_target(greedy))
    with torch.no_grad():
        ref = eager_logp(model, protos, z, target)
    # the steps a decoder takes: each row's tokens and its </s>; teacher forcing a short
    # row beside a long one feeds it padding after that, a state no decoder reaches, where
    # the recurrent state drifts and two runtimes' rounding grows step after step
    lengths = np.array([len(r) for r in greedy])
    reached = np.arange(ref.shape[1])[None, :] <= lengths[:, None]
    return ParityOutputs({"greedy": greedy, "beam": best}, ref), target, reached


def _near_ties_allowed(model, protos, z, vocab: Vocab, tolerance: float):
    """Compare outputs as ``ParityRun.compare``: a backend that parts from the eager model
    only where two continuations are within the tolerance is not failed (``ties.py``)."""

    def compare(search: str, eager: list, theirs: list) -> dict:
        found = compare_outputs(model, protos, z, eager, theirs, tolerance, search, vocab)
        figures = {f"{search}_identical": not found["disagreements"],
                   f"{search}_near_ties": found["near_ties"]}
        if found["disagreements"]:
            figures[f"{search}_disagreements"] = found["disagreements"][:3]
            figures[f"{search}_disagreement_count"] = len(found["disagreements"])
        return figures

    return compare


def check_parity(model, folder: Path, manifest: Manifest, protos: torch.Tensor, max_len: int,
                 cpp_binary: Path | None, tolerance: float) -> ParityRun:
    """Greedy and beam outputs and per-step log-probs of every backend against the eager
    model's, all through the shared decode loop with the manifest's contract."""
    z = torch.zeros(protos.size(0), model.latent)
    contract = manifest.contract()
    width = contract.beam_width
    eager, target, reached = _eager_parity(model, protos, z, width, max_len)
    p_np, z_np = protos.numpy(), z.numpy()

    def decoded(stepper_of) -> dict:
        greedy = decode(stepper_of(), contract, p_np, z_np, GreedySearch(), max_len=max_len)[0]
        best = decode(stepper_of(), contract, p_np, z_np, BeamSearch(width), max_len=max_len)[0]
        return {"greedy": _trim(greedy), "beam": _trim(best)}

    def torchscript() -> ParityOutputs:
        scripted = TorchScriptGenerator(folder, manifest)
        with torch.no_grad():
            logp = scripted.module.score(protos, z, target).numpy()
        return ParityOutputs(decoded(scripted.stepper), logp)

    def onnx() -> ParityOutputs:
        graphs = OnnxGenerator(folder, manifest)
        return ParityOutputs(decoded(graphs.stepper), graphs.score(p_np, z_np, target.numpy()))

    def cpp() -> ParityOutputs:
        greedy, best = (decode_with_runner(cpp_binary, folder, manifest, p_np, z_np, mode,
                                           max_len) for mode in ("greedy", "beam"))
        return ParityOutputs({"greedy": _trim(greedy), "beam": _trim(best)})

    backends = {"torchscript": torchscript, "onnx": onnx}
    if cpp_binary is not None:
        backends["cpp"] = cpp
    vocab = Vocab.load(folder / "vocab.json")
    return ParityRun({"sets": protos.size(0), "tolerance": tolerance, "logp_floor": LOGP_FLOOR},
                     eager, reached, backends, _near_ties_allowed(model, protos, z, vocab, tolerance))


class GeneratorExport(KindSpec):
    """A generator checkpoint, or a generator export folder. Validates the TorchScript and
    ONNX graphs (and the C++ runner, given ``cpp_binary``) on ``parity_sets`` prototype
    sets; ``max_prototypes`` caps ``prototypes.txt`` (the runtimes cycle through it)."""

    kind = "recombine"
    name = "generator"
    relative_logp = True
    onnx_graphs = GENERATOR_GRAPHS
    re_exports = True

    def __init__(self, checkpoint: Path, options: ExportOptions):
        if options.max_prototypes < 1:
            raise SettingError(f"`max_prototypes` {options.max_prototypes}: must be >= 1")
        self.checkpoint, self.options = checkpoint, options
        self.earlier = None  # re-exporting an export folder: its weights and its prototype order
        if checkpoint.is_dir():
            self.earlier = load_manifest(checkpoint, older_ok=True)
            model, self.vocab, self.config = eager_model(checkpoint, self.earlier)
            self.stored = (checkpoint / "prototypes.txt").read_text(encoding="utf-8")
        else:
            model, self.vocab, self.config = load_generator(checkpoint)
        finite_weights(model, checkpoint)
        self.model = deterministic(model)
        # user data: the pairs the checkpoint records
        self.table = training_table(self.config, options.data_dir)
        self.tuples = []
        drawn = export_prototype_options(self.config)
        self.drawn_with = drawn.get("prototype_cut", "mean")
        if self.earlier is None and model.nproto:
            self.tuples = self._draw(model.nproto, drawn)
        self.cut_tuples = self._other_cuts(model.nproto, drawn) if model.nproto else {}

    def _other_cuts(self, nproto: int, drawn: dict) -> dict:
        """The tuples of Omega's other length cuts (SCAN and user data), so that
        `compgen sample EXPORT --prototype-cut CUT` decodes tuples drawn with CUT: cut ->
        tuples, or a re-exported folder's file text (its order kept)."""
        stored = self.earlier.prototype_cuts if self.earlier else {}
        tuples = {}
        for cut in PROTOTYPE_CUTS:
            if cut == self.drawn_with:
                continue
            if cut in stored:
                tuples[cut] = (self.checkpoint / cut_file(cut)).read_text(encoding="utf-8")
                continue
            try:
                tuples[cut] = self._draw(nproto, {**drawn, "prototype_cut": cut})
            except SettingError:   # no length cut here (morphology), or an empty Omega
                pass
        return tuples

    def _draw(self, nproto: int, omega_options: dict) -> list:
        draw = prototype_source(self.config, self.table, nproto, self.options.seed,
                                **omega_options)
        # re-exporting a folder: as many tuples per cut as it stores for its preset's
        cap = self.earlier.prototypes if self.earlier else self.options.max_prototypes
        return draw(min(cap, MAX_PROTOTYPES, _omega_size(draw)))

    def write(self, folder: Path) -> Manifest:
        model, vocab, config, earlier = self.model, self.vocab, self.config, self.earlier
        cfg = model.cfg
        variant, max_len = cfg.variant, cfg.max_len
        torch.manual_seed(self.options.seed)
        export_torchscript(model, folder / "model.ts", max_len)
        export_onnx(model, folder, max_len)
        write_vocab(folder, vocab)
        if earlier is None:
            self.prototypes = write_prototypes(folder / "prototypes.txt", self.tuples, vocab,
                                               variant, max_len)
        else:
            (folder / "prototypes.txt").write_text(self.stored, encoding="utf-8")
            self.prototypes = earlier.prototypes
        self.width = _widest(folder / PROTOTYPE_FILE, model.nproto)
        cuts = {self.drawn_with: {"file": PROTOTYPE_FILE, "prototypes": self.prototypes,
                                  "prototype_width": self.width}}
        for cut, tuples in self.cut_tuples.items():
            path = folder / cut_file(cut)
            if isinstance(tuples, str):
                path.write_text(tuples, encoding="utf-8")
                count = len(tuples.splitlines())
            else:
                count = write_prototypes(path, tuples, vocab, variant, max_len)
            cuts[cut] = {"file": path.name, "prototypes": count,
                         "prototype_width": _widest(path, model.nproto)}
        write_training_pairs(folder / TRAINING_PAIRS, self.table)
        beam_width = int(config.get("sample", {}).get("beam_width", BEAM_WIDTH))
        return Manifest(
            kind=self.kind,
            source_checkpoint=earlier.source_checkpoint if earlier else self.checkpoint.name,
            config=config,
            model={"variant": variant, "nproto": model.nproto, "copy": cfg.copy,
                   "vae": cfg.vae, "hidden": model.hidden, "feed_dim": model.feed_dim,
                   "latent": model.latent, "max_norm": cfg.max_norm,
                   "vocab_size": len(vocab)},
            opset=OPSET,
            graphs=self.graph_ios(folder),
            decoding={
                **Contract.for_model(model, beam_width=beam_width, prototypes=self.prototypes,
                                     prototype_width=self.width).to_manifest(),
                "prototype_format": "ids + </s>" if variant == "scan" else "<s> + ids",
                "latent_prior": ("direction ~ uniform on the sphere, norm ~ U(0, max_norm)"
                                 if cfg.vae else "zeros"),
                "test_time_dropout": False,
                **({"prototype_cuts": cuts} if model.nproto else {}),
            },
            training_pairs=TRAINING_PAIRS,
        )

    def parity(self, folder: Path, manifest: Manifest) -> ParityRun:
        nproto, sets = self.model.nproto, self.options.parity_sets
        k = min(sets, self.prototypes) if nproto else sets
        protos = pad_tuples(read_prototypes(folder / "prototypes.txt", nproto)[:k], nproto, k,
                            self.width)
        return check_parity(self.model, folder, manifest, protos, self.model.cfg.max_len,
                            self.options.cpp_binary, self.tolerance)

    def finish(self, folder: Path, manifest: Manifest) -> Manifest:
        load_check = as_manifest(greedy_rows(folder, manifest))
        earlier_text = self.earlier.card_text if self.earlier is not None else None
        # the card's own text stays
        return replace(manifest, load_check=load_check, card_text=earlier_text)


def _widest(path: Path, nproto: int) -> int:
    """The longest prototype of a tuple file (the width its tuples are padded to)."""
    return max((len(p) for tup in read_prototypes(path, nproto) for p in tup), default=0)


def _omega_size(draw) -> int:
    owner = getattr(draw, "__self__", None)
    try:
        return len(owner) if owner is not None else MAX_PROTOTYPES
    except TypeError:
        return MAX_PROTOTYPES
