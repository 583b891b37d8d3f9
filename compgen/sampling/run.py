"""Sampling from an export folder with any backend, and the one sampling entry.

``sample`` is what ``compgen sample`` and ``compgen pipeline`` call: the options are
resolved once (``SampleOptions``) and a checkpoint goes to the eager sampler, an export
folder to ``sample_export``. On an export every backend follows the manifest's
decoding contract: sample i takes the stored prototype tuple i (cycling), its random
draws are keyed by i, and the filters use the training pairs shipped in the export, so
torch, onnx, torchscript and cpp keep the same samples for the same seed. The Python
backends run ``compgen.sampling.collection.collect_decoded`` around the shared decode loop; the C++
runner does the whole job in one process, n-gram scores, floor and rerank included.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl

from compgen.data.resample import is_tag, split_morph
from compgen.data.table import make_table, token_lists
from compgen.data.vocab import SEP, Vocab
from compgen.decoding.contract import MODES, prior_z, scores_of
from compgen.decoding.input_trie import InputTrie
from compgen.decoding.options import SampleOptions
from compgen.decoding.search import decode, search_for
from compgen.device import CPU, Device, resolve_device, use_tf32
from compgen.errors import SettingError, UserError
from compgen.io import (
    parse_samples_tsv,
    refuse_comment_rows,
    refuse_overwriting_inputs,
    write_samples_tsv,
)
from compgen.lm.rerank import sample_columns
from compgen.neighborhoods.user_data import export_prototype_options, rare_auto_finds_none
from compgen.runtimes.artifact import (
    TRAINING_PAIRS,
    checked_private_copy,
    eager_model,
    load_manifest,
)
from compgen.runtimes.backend_check import check_generator_backends
from compgen.runtimes.manifest import Manifest
from compgen.sampling.collection import (
    NoSamples,
    Sample,
    SampleRun,
    Tally,
    collect_decoded,
    input_stop,
    known_input_trie,
    make_filter,
    report_shortfall,
)
from compgen.sampling.journal import Journal, job_key
from compgen.sampling.tuple_selection import (
    TupleSelection,
    read_prototype_array,
    select_tuples,
    tuples_for_cut,
)
from compgen.system.precision import check_sample_precision

# torch is imported only where a backend needs it: the C++ runner's path does the whole
# job in its own process, and importing torch would be most of its time outside decoding

BACKENDS = ("onnx", "torchscript", "cpp", "torch")


class PrototypeCycle:
    """Hands out the stored-tuple indices of consecutive samples, cycling over the
    selected tuples (``compgen.sampling.tuple_selection``)."""

    def __init__(self, selection: TupleSelection):
        self.selection, self.cursor = selection, 0

    def __call__(self, k: int) -> np.ndarray:
        idx = self.selection.indices(self.cursor, k)
        self.cursor += k
        return idx


def stepper_factory_on(folder: Path, manifest: Manifest, backend: str, threads: int | None,
                       precision: str = "fp32", device: Device | None = None):
    """(``() -> Stepper`` for a Python backend of an export folder, where it runs: the
    device, and for ONNX Runtime the providers its sessions really use). ``precision``:
    checked by ``compgen.system.precision.check_sample_precision``; ``device`` default:
    the CPU."""
    device = device or CPU
    if device.cuda and (precision != "fp32" or backend == "cpp"):
        raise SettingError(f"`device` {device}: CUDA samples fp32 with `backend` onnx, torchscript "
                           f"or torch (not `backend` {backend} `precision` {precision}); or "
                           "`device` cpu")
    use_tf32(device, False)   # fp32 on CUDA is full fp32: the CPU's greedy samples
    if backend == "onnx":
        # start-up: `compgen sample --backend cpp` loads no ONNX backend
        from compgen.runtimes.onnx import OnnxGenerator

        onnx = OnnxGenerator(folder, manifest, threads, precision, device)
        return onnx.stepper, onnx.where
    if backend == "torchscript":
        # start-up: `compgen sample --backend onnx` loads no torch
        from compgen.runtimes.torchscript import TorchScriptGenerator

        return (TorchScriptGenerator(folder, manifest, threads, precision, device).stepper,
                str(device))
    if backend == "torch" and precision == "bf16":
        # start-up: `compgen sample --backend onnx` loads no torch
        from compgen.runtimes.compiled import CompiledBf16Generator

        return CompiledBf16Generator(folder, manifest, threads).stepper, str(device)
    if backend == "torch":
        # start-up: `compgen sample --backend onnx` loads no torch
        import torch

        from compgen.runtimes.eager import EagerStepper
        from compgen.runtimes.graphs import deterministic

        if threads:
            torch.set_num_threads(threads)
        model = deterministic(eager_model(folder, manifest)[0])
        if device.cuda:
            model.to(device.torch)
        return (lambda: EagerStepper(model, manifest.max_len)), str(device)
    raise SettingError(f"`backend` {backend}: unknown (valid: {', '.join(BACKENDS)})")


class ExportDecoder:
    """Decodes rounds of an export's stored prototype tuples with one Python backend:
    ``decoder(prototype indices, strategy, temperature, first) -> (rows, scores)``;
    ``seconds`` spent decoding, ``where`` it runs."""

    def __init__(self, folder: Path, manifest: Manifest, backend: str, options: SampleOptions,
                 stop_input: Callable[[np.ndarray], bool] | None = None,
                 known_inputs: InputTrie | None = None):
        manifest = manifest_for_cut(manifest, options.prototype_cut)
        self.contract = replace(manifest.contract(), beam_width=options.beam_width)
        self.stop_input = stop_input   # rows whose input the filter rejects stop at <sep>
        self.known_inputs = known_inputs   # --novel-inputs: <sep> masked after these
        self.stored = stored_array(folder, manifest)
        self.new_stepper, self.where = stepper_factory_on(
            folder, manifest, backend, options.threads, options.precision,
            resolve_device(options.device))   # a Device from ``sample_export``: checked only
        self.seed = options.seed
        self.seconds = 0.0

    def __call__(self, idx, strategy: str, temperature: float, first: int):
        started = time.perf_counter()
        protos = (np.zeros((len(idx), 0, 1), dtype=np.int64) if self.stored is None
                  else self.stored[np.asarray(idx, dtype=np.int64)])
        ids = first + np.arange(len(idx), dtype=np.int64)
        z = prior_z(self.contract, self.seed, ids)
        tokens, token_logp = decode(self.new_stepper(), self.contract, protos, z, search_for(
            strategy, temperature, self.seed, self.contract.beam_width,
            stop_input=self.stop_input, known_inputs=self.known_inputs), ids)
        self.seconds += time.perf_counter() - started
        return tokens.tolist(), scores_of(token_logp).tolist()


def shipped_training_table(folder: Path) -> pl.DataFrame:
    """The training pairs shipped in an export, as the filters read a data set."""
    path = folder / TRAINING_PAIRS
    if not path.is_file():
        raise UserError(f"{path}: missing; this export predates the shipped training pairs, "
                        f"re-export it (compgen export {folder})")
    pairs = parse_samples_tsv(path.read_text(encoding="utf-8"), str(path))
    xs = [x for x, _ in pairs]
    tags = [(split_morph(x) or ([], []))[1] for x in xs]  # morphology's rare tags
    return make_table(xs, [y for _, y in pairs], "train").with_columns(
        tags=token_lists(tags))


def source_config(source) -> dict:
    """The generator config of a checkpoint or export folder, read without its weights:
    its ``[sample]`` table supplies the defaults of ``SampleOptions``."""
    source = Path(source)
    if source.is_dir():
        return load_manifest(source).config
    # start-up: `compgen sample --backend onnx` loads no torch
    from compgen.training.checkpoint import checkpoint_config

    return checkpoint_config(source, kind="recombine")


def sample(source, options: SampleOptions, backend: str | None = None, *, out=None,
           data_dir=None, log: Callable[[str], None] = print, lm=None, decoder_factory=None,
           tally: Tally | None = None, resume: bool = False) -> SampleRun:
    """The sampling entry of ``compgen sample``, ``compgen pipeline`` and the Python API:
    ``source`` is a checkpoint (eager) or an export folder (``backend``, default onnx);
    ``options`` unset device: auto. ``resume``: go on from the journal an interrupted run
    of the same job left beside ``out`` (``compgen.sampling.journal``; export folders)."""
    source = Path(source)
    exported = source.is_dir()
    backend = backend or ("onnx" if exported else "torch")
    _refuse_overwriting(out, source, lm)
    # the device first: a CUDA device that is not there stops before anything loads
    options = replace(options, device=resolve_device(options.device, auto_cpu=(
        backend == "cpp" or options.precision != "fp32")))
    if backend not in BACKENDS:
        raise SettingError(f"`backend` {backend}: unknown (valid: {', '.join(BACKENDS)})")
    if not exported and backend != "torch":
        raise SettingError(f"`backend` {backend} runs on an export folder: "
                           f"first run 'compgen export {source}'")
    if not exported and options.precision != "fp32":
        raise SettingError(f"`precision` {options.precision} samples an export folder: "
                           f"first run 'compgen export {source}'")
    if (options.resample == "rare" and options.rare in (None, "auto")
            and rare_auto_finds_none(source_config(source))):
        log("warning: `rare` auto found no rare token in the training data (the rarest tokens "
            "are held by more than 1 % of the pairs together): sampling without the rare rule; "
            "name tokens with `rare` TOK,TOK")
        options = replace(options, resample="none", rare_prototypes=False)
    if exported:
        return sample_export(source, options, backend, out=out, log=log, lm=lm,
                             decoder_factory=decoder_factory, tally=tally, resume=resume)
    if resume:
        raise SettingError("`resume`: export folders only (a checkpoint draws its prototype "
                           f"tuples at random); first run 'compgen export {source}'")
    if decoder_factory is not None:
        raise SettingError(f"`ray` samples an export folder: first run 'compgen export {source}'")
    # start-up: `compgen sample --backend onnx` loads no torch
    from compgen.sampling import eager

    return eager.sample_checkpoint(source, options=options, out=out, data_dir=data_dir, log=log,
                                   lm=lm, tally=tally)


def _refuse_overwriting(out, source, lm) -> None:
    """The samples file may replace neither the model sampled nor an LM it is scored by."""
    if out is None:
        return
    models = [] if lm is None else [lm.scorer.base_path, lm.scorer.aug_path]
    refuse_overwriting_inputs(out, [("source", source)] + [("lm", path) for path in models
                                                            if path is not None], "`output`")


def sample_export(folder, options: SampleOptions | None = None, backend: str = "onnx", *,
                  n: int | None = None, out=None, log: Callable[[str], None] = print, lm=None,
                  decoder_factory: Callable | None = None, tally: Tally | None = None,
                  resume: bool = False, **asked) -> SampleRun:
    """Draw ``options.n`` unique (SCAN: novel) samples from an export folder with
    ``backend``: the prototype tuples stored at export time, with the training pairs stored
    with them. ``options`` (else ``n`` and ``asked``, keywords of ``SampleOptions`` over the
    export's ``[sample]``; the device: the CPU). ``lm`` (``compgen.lm.rerank.LmRanking``):
    n-gram filter, scores and rerank (with ``cpp`` inside the runner, with its KenLM build);
    ``decoder_factory`` replaces ``ExportDecoder``
    (``compgen.sampling.ray.RayDecoderFactory``). With ``out``, every backend journals the
    accepted samples as they come (``OUT.partial``); ``resume`` goes on from the journal of
    an interrupted run of the same job, whichever backend wrote it."""
    folder = Path(folder)
    # read and checked once (every file hashed): here when the options come from it
    manifest = load_manifest(folder) if options is None else None
    if options is None:
        options = SampleOptions(manifest.config.get("sample", {}), n=n,
                                **{"device": "cpu", **asked})
    elif n is not None or asked:
        raise TypeError("sample_export: give `options` or `n` and option keywords, not both")
    _refuse_overwriting(out, folder, lm)
    if backend not in BACKENDS:
        raise SettingError(f"`backend` {backend}: unknown (valid: {', '.join(BACKENDS)})")
    if resume and out is None:
        raise SettingError("`resume`: needs an output file (the journal is kept beside it)")
    # resolved once here (a no-op check when ``sample`` did it): what runs below gets the
    # Device itself
    options = replace(options, device=resolve_device(options.device, auto_cpu=(
        backend == "cpp" or options.precision != "fp32")))
    if backend == "cpp" and options.device.cuda:
        raise SettingError(f"`device` {options.device}: `backend` cpp runs on the CPU; use "
                           "`backend` onnx, torchscript or torch (or `device` cpu)")
    manifest = manifest or load_manifest(folder)
    if manifest.kind != "recombine":
        raise UserError(f"{folder}: a '{manifest.kind}' export; only generator exports "
                        "sample (predictors: compgen.runtimes.predictor.predict_exported)")
    config = manifest.config
    check_sample_precision(options.precision, backend)
    check_generator_backends(folder, manifest)

    manifest = manifest_for_cut(manifest, options.prototype_cut)
    if options.test_dropout:
        raise SettingError("`test_dropout`: exported graphs are deterministic; sample the "
                           "checkpoint instead")
    manifest.contract()  # an old contract: a clear error first
    table = shipped_training_table(folder)
    filt = make_filter(config, table, options.resample, options.rare)
    vocab = Vocab.load(folder / "vocab.json")
    known_inputs = known_input_trie(filt, vocab, options.novel_inputs)
    selection = stored_selection(folder, manifest, options, filt, vocab)
    if decoder_factory is not None:
        decoder_factory.check(manifest, backend, options.strategy)
    max_rows = selection.max_rows(options.strategy, options.raise_temperature)
    tally = tally or Tally()
    where = None
    # the runner built and the filter in its terms before the journal opens: an error of
    # the setup (no compiler, a rule it lacks) leaves an interrupted run's journal alone.
    # Its first build (~1 min) is timed apart: it is not sampling.
    start = time.perf_counter()
    runner = _cpp_setup(filt, vocab, lm, log, known_inputs) if backend == "cpp" else None
    build_seconds = time.perf_counter() - start
    start = time.perf_counter()
    key = job_key(manifest, options, lm.describe() if lm else None)
    with (Journal(out, key, resume, log) if out is not None
          else contextlib.nullcontext()) as journal:
        if runner is not None:   # the runner scores, filters and reranks with the LM itself
            samples, decode_seconds = _sample_cpp(folder, manifest, options, runner, vocab, out,
                                                  log, lm, selection, max_rows, tally, journal)
            where = "cpu (C++ runner)"
        else:
            cycle = PrototypeCycle(selection)
            if journal is not None and journal.position is not None:
                cycle.cursor = journal.position.first
            decode_rows = (decoder_factory(folder, manifest, backend, options, selection)
                           if decoder_factory is not None
                           else ExportDecoder(folder, manifest, backend, options,
                                              input_stop(filt, vocab), known_inputs))
            samples = collect_decoded(decode_rows, vocab, cycle, options,
                                      lm.filtered(filt.accept) if lm else filt.accept,
                                      log=log, keep=lm.keep if lm else None,
                                      max_rows=max_rows, tally=tally, journal=journal)
            if out is not None:
                write_samples_tsv(out, [(s.x, s.y) for s in samples], sample_columns(samples))
            decode_seconds = getattr(decode_rows, "seconds", None)
            where = getattr(decode_rows, "where", None)
    seconds = time.perf_counter() - start
    return SampleRun(samples, seconds, str(out) if out else None, config["data"], decode_seconds,
                     tally.decoded, selection.description, where, table, build_seconds)


def stored_selection(folder: Path, manifest: Manifest, options: SampleOptions, filt,
                     vocab: Vocab) -> TupleSelection:
    """The stored tuples this job decodes: first occurrences and, with rare words to
    cover (``--rare-prototypes``; by default whenever ``--resample rare`` names them),
    only the tuples whose prototypes hold the rare phrase (SCAN) or a rare token (user
    data)."""
    phrase = getattr(filt.rule, "phrase", None)
    tokens = getattr(filt.rule, "tokens", None)
    wanted = options.rare_prototypes
    if wanted and phrase is None and tokens is None:
        raise SettingError("`rare_prototypes`: needs `resample` rare with rare words or tokens; "
                           "morphology exports are drawn around rare tags already")
    chosen = wanted in (None, True)
    cover = tuple(phrase) if phrase is not None and chosen else ()
    any_of = tuple(sorted(tokens)) if tokens is not None and chosen else ()
    return select_tuples(stored_array(folder, manifest), manifest.prototypes, vocab.index,
                         cover, any_of, str(folder / manifest.prototype_file))


def manifest_for_cut(manifest: Manifest, cut: str | None) -> Manifest:
    """The manifest as a job with this length cut of Omega's prototypes reads it (the
    file of its tuples: ``compgen.sampling.tuple_selection.tuples_for_cut``); None: the
    cut the preset's tuples were drawn with."""
    drawn_with = export_prototype_options(manifest.config).get("prototype_cut", "mean")
    return tuples_for_cut(manifest, cut or drawn_with, drawn_with)


def stored_array(folder: Path, manifest: Manifest) -> np.ndarray | None:
    """The export's prototype tuples (of the job's cut: ``manifest_for_cut``) as one id
    array (None without prototypes)."""
    if manifest.nproto == 0:
        return None
    return read_prototype_array(folder / manifest.prototype_file, manifest.nproto,
                                manifest.prototype_width, manifest.vocab_size)


def _cpp_setup(filt, vocab: Vocab, lm, log, known_inputs: InputTrie | None = None
               ) -> tuple[Path, dict]:
    """The runner binary (with ``lm``: the KenLM build, which scores, filters and reranks
    as ``lm`` would) and the filter as its job records."""
    # start-up: `compgen sample --backend onnx` loads no C++ runner code
    from compgen.runtimes.cpp import build_runner

    accept_lines = filter_spec(filt, vocab)
    if known_inputs is not None:   # the runner builds the same trie from train.tsv
        accept_lines["novel_inputs"] = 1
    if lm is not None:   # the n-gram floor and order belong to the filter and keep steps
        accept_lines.update(lm.runner_job())
    return build_runner(log=log, kenlm=lm is not None), accept_lines


def _sample_cpp(folder: Path, manifest: Manifest, options: SampleOptions, runner: tuple,
                vocab: Vocab, out, log, lm=None, selection: TupleSelection | None = None,
                max_rows: int | None = None, tally: Tally | None = None,
                journal: Journal | None = None) -> tuple[list[Sample], float]:
    """The whole job in one C++ runner process (``runner``: ``_cpp_setup``'s); returns
    what it wrote and its seconds spent decoding. ``journal``: the runner appends its
    rounds to it (and goes on from its position, read here)."""
    # start-up: `compgen sample --backend onnx` loads no C++ runner code
    from compgen.runtimes.cpp import job_text, run_harness

    binary, accept_lines = runner
    resume = None if journal is None else runner_resume(journal, vocab)
    contract = manifest.contract()
    built = []
    if options.precision == "bf16":
        # start-up: `compgen sample --backend onnx` loads no torch
        from compgen.runtimes.reduced import bf16_libraries, bf16_sampler

        built = [bf16_sampler(folder, manifest), bf16_libraries(folder, manifest)]
    if out is not None:   # the runner writes beside -o, as atomic_open does for the others
        Path(out).parent.mkdir(parents=True, exist_ok=True)
    # the runner loads the bytes checked: a private copy, checked as it is made
    with checked_private_copy(folder, manifest, built) as copy:
        model, compiled = (copy / path.name for path in built) if built else (None, None)
        job = job_text(copy, contract, options, out=out, model=model, compiled=compiled,
                       filter_spec=accept_lines,
                       tuples=None if selection is None else selection.selected,
                       prototype_file=manifest.prototype_file,
                       max_rows=max_rows, resume=resume,
                       journal=None if journal is None else journal.hand_over())
        result = run_harness(binary, job, log, out=out, on_round=None if tally is None
                             else _runner_progress(tally, options))
    if tally is not None:
        tally.decoded, tally.rounds, tally.accepted = result.rows, result.rounds, result.accepted
    if lm is not None:
        lm.scorer.record(result.lm_sentences, result.lm_seconds)
    report_shortfall(result.kept, options.n, result.rounds, options.batch_size,
                     (options.strategy, options.temperature),
                     (result.strategy, result.temperature), options.max_rounds,
                     options.raise_temperature, log,
                     exhausted=max_rows is not None and result.rows >= max_rows)
    text = Path(out).read_text(encoding="utf-8") if out is not None else result.output
    try:   # the other backends refuse such a row before writing: this one after
        refuse_comment_rows(text, str(out or "<runner>"))
    except UserError:
        if out is not None:
            Path(out).unlink(missing_ok=True)
        raise
    return read_scored_samples(text, str(out or "<runner>")), result.decode_seconds


def runner_resume(journal: Journal, vocab: Vocab):
    """A journal's position as the runner's resume records (None: a new job): the samples
    as ids of ``x <sep> y``; a token outside the vocabulary is a damaged journal."""
    # start-up: `compgen sample --backend onnx` loads no C++ runner code
    from compgen.runtimes.cpp import RunnerResume

    at = journal.position
    if at is None:
        return None
    if at.strategy not in MODES:
        raise UserError(f"{journal.path}: damaged journal (strategy {at.strategy!r})")
    ids, samples = vocab.index, []
    for x, y, logprob in at.samples:
        unknown = [t for t in (*x, *y) if t not in ids]
        if unknown:
            raise UserError(f"{journal.path}: a sample with {unknown[0]!r}, a token this "
                            "export does not know; run without --resume")
        samples.append(([ids[t] for t in x] + [ids[SEP]] + [ids[t] for t in y], logprob))
    return RunnerResume(at.rounds, at.first, at.stalled, MODES[at.strategy], at.temperature,
                        samples)


def _runner_progress(tally: Tally, options: SampleOptions) -> Callable[[int, int, int], None]:
    """The C++ runner's round figures into ``tally`` (and its progress bar)."""
    tally.wanted = max(options.nsamples or options.n, options.n)

    def update(rounds: int, rows: int, accepted: int) -> None:
        tally.rounds, tally.decoded, tally.accepted = rounds, rows, accepted
        if tally.on_round is not None:
            tally.on_round(tally)
    return update


def read_scored_samples(text: str, source: str) -> list[Sample]:
    """Samples of a samples TSV with its logprob (and lm_logprob) columns."""
    pairs = parse_samples_tsv(text, source)
    scores = [[float(v) for v in line.split("\t")[2:]] for line in text.splitlines()
              if line.strip() and not line.startswith("#")]
    return [Sample(x, y, row[0], row[1] if len(row) > 1 else None)
            for (x, y), row in zip(pairs, scores)]


def filter_spec(filt, vocab: Vocab) -> dict:
    """A ``SampleFilter`` as the runner's job lines (token ids instead of strings)."""
    spec = {"novel": int(filt.novel), "morphology": int(filt.train_tags is not None)}
    ids = vocab.index
    if filt.train_tags is not None:
        spec["train_tags"] = [ids[t] for t in filt.train_tags if t in ids]
    spec["is_tag"] = [i for i, t in enumerate(vocab.tokens) if is_tag(t)]
    spec["tag_shaped"] = [i for i, t in enumerate(vocab.tokens)
                          if t and all(c.isupper() or c.isdigit() for c in t)]
    rule = filt.rule
    if rule is None:
        spec["rule"] = "none"
    elif getattr(rule, "phrase", None) is not None:
        spec["rule"] = ["contains"] + [ids.get(t, -1) for t in rule.phrase]
    elif getattr(rule, "tags", None) is not None:
        spec["rule"] = ["tags"] + [ids[t] for t in rule.tags if t in ids]
    elif getattr(rule, "tokens", None) is not None:   # any of these tokens, either side
        spec["rule"] = ["any"] + sorted(ids[t] for t in rule.tokens if t in ids)
    else:
        raise SettingError("`backend` cpp: this resampling rule has no C++ form; use onnx")
    return spec


__all__ = ["BACKENDS", "NoSamples", "sample", "sample_export", "source_config"]
