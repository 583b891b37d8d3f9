"""Sampling throughput of every backend, side by side, on one recomb-2 SCAN generator.

    .venv/bin/python scripts/bench/bench_sampling.py [--checkpoint recomb2.pt] [--batches 1,32,256,1024]
        [--quality-export exported/scan-jump-recomb2] [--threads N] [--json bench.json]
    .venv/bin/python scripts/bench/bench_sampling.py --base-ref 894b2c3 [--base-tree DIR]
        [--rounds 3] [--batches 1,32,256] [--threads N] [--json side-by-side.json]

With --base-ref the throughput part runs in this tree and in the base commit's (a git
worktree, one child process each under its PYTHONPATH, alternating), on the same
generator, and prints both trees' samples/s per backend and batch size and their ratio.

Without --checkpoint a generator of the reference size (recombine_scan: H 512, E 64,
A 128) is initialised at random and exported; throughput does not depend on training as
long as every backend decodes the same number of steps, so decoding runs greedy for
``--steps`` steps (a random model rarely emits </s>). Every backend runs the same
decoding contract (``compgen.decoding``) and every call decodes fresh prototype tuples:
consecutive stored tuples, as a sampling run takes them, and never a tuple an earlier
measurement of that backend decoded. The exported backends encode each distinct
prototype once (``PrototypeCache``); the eager model encodes every prototype of every
tuple. The share of prototypes the ONNX backend really encoded is printed per batch size.

Prints the CPU's flags and the load average, the machine's fp32 matmul rate (measured in
the same run), samples/s for eager PyTorch, TorchScript and ONNX Runtime (from Python),
the C++ runner (its own decode time, model load excluded), and the reduced-precision
paths of ``compgen.runtimes.reduced``: int8 ONNX Runtime (dynamically quantised weights)
and, on a CPU with AVX512-BF16 or AMX units, bf16 TorchScript and the bf16 graphs
compiled by AOTInductor (``compgen.runtimes.inductor``) from Python (``--backend
torch --precision bf16``) and in the C++ runner (``--backend cpp --precision bf16``);
each backend's ratio to eager and the fraction of the matmul rate reached. Quality of reduced
precision: the share of greedy outputs equal to fp32's (the benchmark model), and the
share of correct SCAN pairs among greedy samples of a trained jump generator
(``--quality-export``, default the shipped export), fp32 against each reduced path.

Figures (the same definitions are written into the JSON's "definitions"):
  eager            samples/s of the model's own forward: ``model.encode`` then
                   ``model.decode_step`` and a torch argmax per step, no decoding loop of
                   compgen.decoding around it (every prototype of every tuple encoded)
  eager_loop       samples/s of the eager model through compgen.decoding's greedy search
                   (``EagerStepper``: numpy between steps), as ``--backend torch`` runs it
  torchscript, onnx, onnx_int8, ...  samples/s through compgen.decoding, with the
                   export's prototype cache (a distinct prototype encoded once)
  cpp              samples/s of the C++ runner, its own decode time (model load excluded)
  gflop_per_sample_full   matmul FLOPs per sample when every prototype is encoded
                   (the eager model's own forward, counted by torch's FlopCounterMode;
                   fused LSTM layers by their weight shapes)
  gflop_per_sample[backend]  matmul FLOPs per sample of the work that backend did: the
                   decoder and per-tuple encoder part of the full count, plus the
                   prototype encoder's FLOPs per prototype times the prototypes it really
                   encoded (the cache's counter) per sample; a backend that keeps the
                   attention memory per prototype is counted by the memory rows the
                   cache's counter says it computed (fp32 ONNX Runtime and TorchScript:
                   per sample in batch-wide rounds, once per prototype in every slot once
                   the job revisits its prototypes); the C++ runner, which has no counter,
                   and any other backend without one: each distinct prototype of its
                   samples counted once (a lower bound of its work)
  matmul_fraction[backend]  fp32 backends only: samples/s x gflop_per_sample[backend] /
                   matmul_gflops; a figure above 1 cannot be right: it is reported as
                   invalid, not capped (int8 and bf16 products have other ceilings)
  matmul_gflops    the best fp32 rate of 512^3, 1024^3 and 2048^3 products with the same
                   threads, measured before and after the backends run
"""

from __future__ import annotations

import argparse
import atexit
import dataclasses
import inspect
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from _harness import ROOT, alternating, base_tree, cpu_flag_list, cpu_model, import_moved, tree_env
from torch.utils.flop_counter import FlopCounterMode

CHILD = "--tree-child"   # a run inside a tree's PYTHONPATH (this one's or the base's), for --base-ref
if CHILD not in sys.argv:
    sys.path.insert(0, str(ROOT))

# each module by its path in this tree, then by the one it had before the package layout
# (a --base-ref run measures an older tree with this script)
_contract = import_moved("compgen.decoding.contract", "compgen.decoding.core", "compgen.decoding")
_search = import_moved("compgen.decoding.search", "compgen.decoding.core", "compgen.decoding")
_artifact = import_moved("compgen.runtimes.artifact")
_reduced = import_moved("compgen.runtimes.reduced")
_cpp = import_moved("compgen.runtimes.cpp", "compgen.export.cpp_runner")
MODES, Contract, decode = _contract.MODES, _contract.Contract, _search.decode
load_manifest, read_prototypes = _artifact.load_manifest, _artifact.read_prototypes
export_checkpoint = import_moved("compgen.export.kinds",
                                 "compgen.export.generator").export_checkpoint
pad_tuples = import_moved("compgen.runtimes.recorded_outputs", "compgen.export.generator").pad_tuples
deterministic = import_moved("compgen.runtimes.graphs").deterministic
bf16_libraries, bf16_sampler = _reduced.bf16_libraries, _reduced.bf16_sampler
CompiledBf16Generator = import_moved("compgen.runtimes.compiled",
                                     "compgen.export.compiled_decoder").CompiledBf16Generator
build_runner, job_text, run_harness = _cpp.build_runner, _cpp.job_text, _cpp.run_harness
SampleOptions = import_moved("compgen.decoding.options", "compgen.sampling.options",
                             "compgen.sample_options").SampleOptions
OnnxGenerator = import_moved("compgen.runtimes.onnx",
                             "compgen.export.onnx_decoder").OnnxGenerator
TorchScriptGenerator = import_moved("compgen.runtimes.torchscript",
                                    "compgen.export.torchscript_decoder").TorchScriptGenerator
EagerStepper = import_moved("compgen.runtimes.eager", "compgen.sampling").EagerStepper
cpu_has_bf16 = import_moved("compgen.system.precision", "compgen.precision").cpu_has_bf16
_checkpoint = import_moved("compgen.training.checkpoint", "compgen.checkpoint")
# greedy: a search object in this tree, the mode number in trees from before the classes
GREEDY = _search.GreedySearch() if hasattr(_search, "GreedySearch") else MODES["greedy"]
FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_vnni",
         "avx_vnni", "amx_bf16", "amx_int8", "amx_tile")


def cpu_flags() -> dict:
    have = cpu_flag_list(FLAGS)
    return {"model": cpu_model("unknown"), "cores": os.cpu_count(), **{f: f in have for f in FLAGS}}


def matmul_gflops(sizes=(512, 1024, 2048), repeats: int = 5, trials: int = 5) -> float:
    """The machine's fp32 matmul rate: the best of ``trials`` timings of n^3 products."""
    best = 0.0
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        for _ in range(2):
            a @ b
        for _ in range(trials):
            start = time.perf_counter()
            for _ in range(repeats):
                a @ b
            best = max(best, 2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e9)
    return best


@torch.no_grad()
def eager_forward(model, protos: np.ndarray, z: np.ndarray, steps: int, bos: int):
    """The eager model's own greedy forward: encode, then ``steps`` decoder steps with a
    torch argmax (no compgen.decoding loop, no numpy between steps)."""
    memory, state = model.encode(torch.from_numpy(protos), torch.from_numpy(z), steps)
    token = torch.full((protos.shape[0],), bos, dtype=torch.long)
    out = []
    for _ in range(steps):
        logp, state = model.decode_step(token, state, memory)
        token = logp.argmax(1)
        out.append(token)
    return torch.stack(out, 1)


def _rnn_layer_flops(input_shape, w_ih_shape, w_hh_shape, *args, **kwargs) -> int:
    """Matmul FLOPs of one direction of a fused LSTM layer (the prototype encoder): the
    flop counter has no formula for this op, so without one it counts the encoder as 0."""
    rows = math.prod(input_shape[:-1])  # steps x sequences
    return 2 * rows * (math.prod(w_ih_shape) + math.prod(w_hh_shape))


def count_flops(fn) -> int:
    """Matmul FLOPs of ``fn()`` on the eager model (addmm, mm, bmm and fused LSTM layers)."""
    mapping = {torch.ops.aten.mkldnn_rnn_layer: _rnn_layer_flops}
    with torch.no_grad(), FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        fn()
    return counter.get_total_flops()


def rate(fn, batch: int, min_seconds: float) -> float:
    """Samples/s of ``fn()`` (one batch per call), after one warm-up call."""
    fn()
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return batch * calls / elapsed


def random_checkpoint(path: Path, data: str) -> None:
    from compgen.data import load_dataset
    from compgen.data.vocab import Vocab

    config = _checkpoint.load_preset("recombine_scan")
    config["data"] = data
    vocab = Vocab.from_table(load_dataset(data))
    torch.manual_seed(0)
    model = _checkpoint.build_recombine(config, len(vocab))
    _checkpoint.save_checkpoint(path, model, config, vocab, "recombine")


def _cut(row, eos: int) -> list[int]:
    ids = [int(t) for t in row]
    return ids[: ids.index(eos) + 1] if eos in ids else ids


class TupleStream:
    """Consecutive stored tuples (a sampling run's order), never the same twice: one
    stream per backend goes on across batch sizes, so a backend's encoding cache never
    holds a tuple of an earlier measurement (it would pay for work done before)."""

    def __init__(self, tuples, nproto: int, width: int):
        self.tuples, self.nproto, self.width, self.cursor = tuples, nproto, width, 0

    def __call__(self, batch: int):
        idx = (self.cursor + np.arange(batch)) % len(self.tuples)
        self.cursor += batch
        chosen = [self.tuples[i] for i in idx]
        return pad_tuples(chosen, self.nproto, batch, self.width).numpy(), idx


def cpp_rate(binary: Path, folder: Path, contract: Contract, batch: int, threads: int,
             bf16: tuple[Path, Path] | None = None) -> float:
    """Samples/s of the C++ runner (``bf16``: the bf16 sampler and compiled libraries instead of
    model.ts)."""
    n = max(batch, min(4096, 8 * batch))
    run = {"temperature": 1.0, "seed": 0, "n": n, "batch_size": batch, "max_rounds": 1,
           "threads": threads}
    extra = {"out": None, "raw": True, "zero_latent": True, "model": bf16 and bf16[0],
             "compiled": bf16 and bf16[1]}
    if "options" in inspect.signature(job_text).parameters:
        job = job_text(folder, contract, SampleOptions(strategy="greedy", **run), **extra)
    else:   # a tree from before the job was written from SampleOptions
        job = job_text(folder, contract, mode=MODES["greedy"], nsamples=n, **run, **extra)
    result = run_harness(binary, job)
    return n / result.decode_seconds


def section(manifest, name: str) -> dict:
    """A section of the manifest: a ``Manifest``'s field, or (an older tree) its JSON's."""
    return manifest[name] if isinstance(manifest, dict) else getattr(manifest, name)


def with_max_len(manifest, steps: int):
    """The manifest with its decoding contract's ``max_len`` set to ``steps``."""
    if isinstance(manifest, dict):   # an older tree: the manifest is its JSON object
        return {**manifest, "decoding": {**manifest["decoding"], "max_len": steps}}
    return dataclasses.replace(manifest, decoding={**manifest.decoding, "max_len": steps})


def generators(folder: Path, manifest, threads: int, bf16: bool) -> dict:
    """The Python backends of an export that decode through ``compgen.decoding``: fp32
    TorchScript and ONNX, int8 ONNX, and bf16 TorchScript where the CPU has the units."""
    gens = {"torchscript": TorchScriptGenerator(folder, manifest, threads),
            "onnx": OnnxGenerator(folder, manifest, threads),
            "onnx_int8": OnnxGenerator(folder, manifest, threads, "int8")}
    if bf16:
        gens["torchscript_bf16"] = TorchScriptGenerator(folder, manifest, threads, "bf16")
        gens["torch_bf16"] = CompiledBf16Generator(folder, manifest, threads)
    return gens


def greedy_quality(folder: Path, manifest, n: int, threads: int, bf16: bool) -> dict:
    """Greedy samples of a trained export, fp32 ONNX against each reduced-precision path:
    the share of correct SCAN pairs, and the share of outputs equal to fp32's."""
    from compgen.data.scan import load_scan_grammar, scan_sample_report
    from compgen.data.sources import resolve_data_dir
    from compgen.data.vocab import Vocab

    split_datum = import_moved("compgen.data.resample", "compgen.resample").split_datum
    shipped_training_table = import_moved("compgen.sampling.run",
                                          "compgen.runtime.sampler").shipped_training_table

    contract = Contract.from_manifest(section(manifest, "decoding"))
    vocab = Vocab.load(folder / "vocab.json")
    nproto = section(manifest, "model")["nproto"]
    tuples = read_prototypes(folder / "prototypes.txt", nproto)[:n]
    protos = pad_tuples(tuples, nproto, len(tuples),
                        contract.prototype_width).numpy()
    z = np.zeros((len(tuples), contract.latent), np.float32)
    train = shipped_training_table(folder)
    grammar = load_scan_grammar(resolve_data_dir(None))
    gens = generators(folder, manifest, threads, bf16)
    out, rows = {"samples": len(tuples)}, {}
    for name in ("onnx", "onnx_int8", "torchscript_bf16", "torch_bf16"):
        if name not in gens:
            continue
        tokens = []
        for start in range(0, len(tuples), 256):
            part = slice(start, start + 256)
            tokens += decode(gens[name].stepper(), contract, protos[part], z[part],
                             GREEDY)[0].tolist()
        rows[name] = [_cut(r, contract.eos) for r in tokens]
        pairs = [p for p in (split_datum(vocab.decode(r)) for r in tokens) if p]
        report = scan_sample_report(pairs, train, grammar, "jump")
        out[f"{name}_correct_share"] = report["correct_share"] * len(pairs) / len(tokens)
        out[f"{name}_greedy_equal_share"] = float(np.mean([a == b for a, b in
                                                          zip(rows["onnx"], rows[name])]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                     epilog="Figures:\n" + DEFINITIONS,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--data", default="scan/jump")
    parser.add_argument("--batches", default="1,32,256,1024")
    parser.add_argument("--steps", type=int, default=45)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--quality-export", type=Path, default=ROOT / "exported" / "scan-jump-recomb2")
    parser.add_argument("--quality-samples", type=int, default=1024)
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="threads of every backend (default: the cores)")
    parser.add_argument("--base-ref", help="also measure this commit, side by side (its samples/s "
                        "and this tree's / its, per backend and batch size)")
    parser.add_argument("--base-tree", type=Path, help="an existing checkout of --base-ref")
    parser.add_argument("--rounds", type=int, default=1,
                        help="with --base-ref: runs of each tree, in alternating order (medians)")
    parser.add_argument(CHILD, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.base_ref:
        side_by_side(args)
        return
    threads = args.threads
    torch.set_num_threads(threads)
    flags = cpu_flags()
    print("CPU: " + flags["model"] + f", {flags['cores']} cores; flags: "
          + " ".join(f for f in FLAGS if flags[f]) + "; absent: "
          + " ".join(f for f in FLAGS if not flags[f]), file=sys.stderr)
    # the machine's rate, measured before ONNX Runtime's and the runner's thread pools exist
    # (their spinning threads slow a GEMM measured next to them) and again at the end
    gflops_peak = matmul_gflops()
    work = Path(tempfile.mkdtemp(prefix="bench-sampling-"))
    atexit.register(shutil.rmtree, work, True)   # the exports are ~100 MB: leave nothing
    checkpoint = args.checkpoint
    if checkpoint is None:
        checkpoint = work / "recomb2-random.pt"
        random_checkpoint(checkpoint, args.data)
    folder = work / "export"
    binary = build_runner(log=lambda m: print(m, file=sys.stderr))
    manifest = export_checkpoint(checkpoint, folder, parity_sets=64, cpp_binary=binary,
                                 log=lambda m: print(m, file=sys.stderr))

    model = deterministic(_checkpoint.load_generator(checkpoint)[0])
    steps = args.steps
    model.cfg.max_len = steps  # a model that never stops decodes exactly `steps` steps
    manifest = with_max_len(manifest, steps)
    contract = Contract.from_manifest(section(manifest, "decoding"))
    bf16 = cpu_has_bf16()
    gens = generators(folder, manifest, threads, bf16)
    bf16_compiled = ((bf16_sampler(folder, manifest), bf16_libraries(folder, manifest))
                     if bf16 else None)
    tuples = read_prototypes(folder / "prototypes.txt", model.nproto)
    width = contract.prototype_width
    steppers = {"eager_loop": lambda: EagerStepper(model, steps),
                **{name: gen.stepper for name, gen in gens.items()}}
    streams = {name: TupleStream(tuples, model.nproto, width)
               for name in ("eager", *steppers)}

    rows = []
    for batch in [int(b) for b in args.batches.split(",")]:
        z = np.zeros((batch, model.latent), np.float32)
        protos0, _ = TupleStream(tuples, model.nproto, width)(batch)
        full = count_flops(lambda: eager_forward(model, protos0, z, steps, contract.bos)) / batch
        flat = torch.from_numpy(protos0.reshape(-1, protos0.shape[-1]))
        per_prototype = count_flops(lambda: model.encode_sequences(flat)) / max(len(flat), 1)
        rest = full - per_prototype * model.nproto   # the decoder and the per-tuple encoder
        with torch.no_grad():
            enc = model.encode_sequences(flat)[0].reshape(batch, model.nproto, width, -1)
        # the per-tuple encoder's keys and values (K x width positions); a backend that keeps
        # them per prototype is counted by the memory rows it computed (the cache's counter)
        memory = count_flops(lambda: model.attention.memory(enc)) / batch
        result = {"batch": batch, "gflop_per_sample_full": full / 1e9,
                  "gflop_per_prototype": per_prototype / 1e9}
        work = {"eager": full, "eager_loop": full}
        result["eager"] = rate(
            lambda: eager_forward(model, streams["eager"](batch)[0], z, steps, contract.bos),
            batch, args.seconds)

        def runner(make_stepper, stream: TupleStream):
            def call():
                protos, _ = stream(batch)
                return decode(make_stepper(), contract, protos, z, GREEDY)
            return call

        for name, make_stepper in steppers.items():
            cache = getattr(gens.get(name), "cache", None)
            cursor = streams[name].cursor
            encoded, rows = (cache.encoded, cache.memory_rows) if cache else (0, 0)
            result[name] = rate(runner(make_stepper, streams[name]), batch, args.seconds)
            decoded = streams[name].cursor - cursor
            if cache is not None:   # prototypes and memory rows really computed per sample
                new = (cache.encoded - encoded) / decoded
                work[name] = rest + per_prototype * new
                if cache.ops is not None:
                    work[name] += (memory / model.nproto * (cache.memory_rows - rows) / decoded
                                   - memory)
                result[f"{name}_encoded_share"] = (cache.encoded - encoded) / (decoded * model.nproto)
            elif name != "eager_loop":   # no counter: each distinct prototype counted once
                work[name] = rest + per_prototype * distinct_prototypes(
                    tuples, cursor, decoded) / decoded
        result["cpp"] = cpp_rate(binary, folder, contract, batch, threads)
        n_cpp = max(batch, min(4096, 8 * batch))   # cpp_rate's samples: tuples 0 .. n - 1
        # the C++ runner keeps the memory per prototype too (each distinct one counted once)
        work["cpp"] = rest - memory + (per_prototype + memory) * distinct_prototypes(
            tuples, 0, n_cpp) / n_cpp
        if bf16_compiled is not None:
            result["cpp_bf16"] = cpp_rate(binary, folder, contract, batch, threads, bf16_compiled)
            work["cpp_bf16"] = work["cpp"]
        result["gflop_per_sample"] = {k: v / 1e9 for k, v in work.items()}
        # reduced precision against fp32 on the benchmark model: greedy outputs cut at </s>
        fp32 = decode(gens["onnx"].stepper(), contract, protos0, z, GREEDY)[0]
        for name in REDUCED:
            if name in gens:
                mine = decode(gens[name].stepper(), contract, protos0, z, GREEDY)[0]
                result[f"{name}_greedy_equal_share"] = float(np.mean(
                    [_cut(a, contract.eos) == _cut(b, contract.eos) for a, b in zip(fp32, mine)]))
        rows.append(result)
        print(f"batch {batch}: " + ", ".join(f"{k} {v:.2f}" for k, v in result.items()
                                              if isinstance(v, float)), file=sys.stderr)

    gflops_peak = max(gflops_peak, matmul_gflops())
    quality = None
    if args.quality_export and (args.quality_export / "manifest.json").is_file():
        quality = greedy_quality(args.quality_export, load_manifest(args.quality_export),
                                 args.quality_samples, threads, bf16)
    names = [n for n in ("eager", "eager_loop", "torchscript", "onnx", "cpp", "onnx_int8",
                         "torchscript_bf16", "cpp_bf16", "torch_bf16") if n in rows[0]]
    for r in rows:
        r["ratio_to_eager"] = {n: r[n] / r["eager"] for n in names}
        r["matmul_fraction"] = {n: r[n] * r["gflop_per_sample"][n] / gflops_peak
                                for n in FP32 if n in r["gflop_per_sample"]}
    report(rows, names, quality, flags, model, steps, threads, gflops_peak, args.quality_export)
    if args.json:
        args.json.write_text(json.dumps({"definitions": DEFINITIONS, "cpu": flags,
                                         "threads": threads, "steps": steps,
                                         "hidden": model.hidden, "matmul_gflops": gflops_peak,
                                         "load_average": os.getloadavg(), "rows": rows,
                                         "reduced_quality": quality}, indent=1))


def distinct_prototypes(tuples, first: int, count: int) -> int:
    """Distinct prototypes among the stored tuples ``first .. first + count - 1`` (cycling)."""
    return len({tuple(p) for i in range(first, first + count) for p in tuples[i % len(tuples)]})


# the figures' definitions, as the module's docstring states them
DEFINITIONS = __doc__.split("written into the JSON's \"definitions\"):\n", 1)[1]


def side_by_side(args) -> None:
    """``--base-ref``: the throughput part of this script run in this tree and in the
    base's (one child process each, under that tree's PYTHONPATH), ``--rounds`` times in
    alternating order, on the same generator; per backend and batch size the medians of
    both and their ratio."""
    trees = {"this": ROOT, "base": base_tree(args.base_ref, args.base_tree)}
    flags = cpu_flags()
    print(f"CPU {flags['model']}, {flags['cores']} cores, flags: "
          + " ".join(f for f in FLAGS if flags[f]) + f"; threads {args.threads}; base "
          f"{args.base_ref} ({trees['base']})", file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="bench-sampling-"))
    atexit.register(shutil.rmtree, work, True)
    checkpoint = args.checkpoint
    if checkpoint is None:   # one random generator for both trees
        checkpoint = work / "recomb2-random.pt"
        random_checkpoint(checkpoint, args.data)
    runs: dict[str, list] = {name: [] for name in trees}
    for turn in range(args.rounds):
        for name in alternating(list(trees), turn):
            out = work / f"{name}-{turn}.json"
            cmd = [sys.executable, __file__, CHILD, "--checkpoint", str(checkpoint),
                   "--batches", args.batches, "--steps", str(args.steps), "--seconds",
                   str(args.seconds), "--threads", str(args.threads),
                   "--quality-export", str(work / "no-quality"), "--json", str(out)]
            done = subprocess.run(cmd, env=tree_env(trees[name]), cwd=trees[name],
                                  capture_output=True, text=True, check=False)
            if done.returncode != 0:
                sys.exit(f"error: the benchmark in {trees[name]} failed:\n{done.stderr[-3000:]}")
            runs[name].append(json.loads(out.read_text())["rows"])
            print(f"{name} round {turn + 1} done", file=sys.stderr)
    names = [n for n in ("eager", "torchscript", "onnx", "cpp", "onnx_int8", "torchscript_bf16",
                         "cpp_bf16", "torch_bf16")
             if n in runs["this"][0][0] and n in runs["base"][0][0]]
    rows = []
    for i, batch in enumerate(r["batch"] for r in runs["this"][0]):
        for n in names:
            this = statistics.median(run[i][n] for run in runs["this"])
            base = statistics.median(run[i][n] for run in runs["base"])
            rows.append({"batch": batch, "backend": n, "this": this, "base": base,
                         "ratio": this / base})
    print(f"\nsamples/s, median of {args.rounds} alternating run(s) per tree; greedy, "
          f"{args.steps} decoder steps; load average " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    print("| batch | backend | this samples/s | base samples/s | this / base |")
    print("|---:|---|---:|---:|---:|")
    for r in rows:
        print(f"| {r['batch']} | {r['backend']} | {r['this']:,.1f} | {r['base']:,.1f} | "
              f"{r['ratio']:.3f} |")
    if args.json:
        args.json.write_text(json.dumps({"cpu": flags, "threads": args.threads, "steps": args.steps,
                                         "base": args.base_ref, "rounds": args.rounds,
                                         "load_average": os.getloadavg(), "rows": rows,
                                         "runs": runs}, indent=1))


FP32 = ("eager", "eager_loop", "torchscript", "onnx", "cpp")
# the Python reduced paths (cpp_bf16 runs the compiled libraries of torch_bf16)
REDUCED = ("onnx_int8", "torchscript_bf16", "torch_bf16")


def report(rows, names, quality, flags, model, steps, threads, gflops_peak, quality_export):
    print(f"\nCPU {flags['model']}, {flags['cores']} cores, flags: "
          + " ".join(f for f in FLAGS if flags[f])
          + ("" if flags["avx512_bf16"] or flags["amx_bf16"] else
             " (no AVX512-BF16 / AMX: reduced precision here is int8)")
          + "; load average " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    print(f"recomb-2 SCAN generator: H {model.hidden}, vocab {model.vocab_size}, greedy, "
          f"{steps} decoder steps; threads {threads}; fp32 matmul (best of 512^3, 1024^3, 2048^3) "
          f"{gflops_peak:.1f} GFLOP/s\n")
    print("| batch | GFLOP/sample, all prototypes encoded | "
          + " | ".join(f"{n} samples/s" for n in names)
          + " | " + " | ".join(f"{n} / eager" for n in names[1:])
          + " | prototypes encoded (onnx) |")
    print("|---:|---:|" + "---:|" * (2 * len(names) - 1) + "---:|")
    for r in rows:
        print(f"| {r['batch']} | {r['gflop_per_sample_full']:.4f} | "
              + " | ".join(f"{r[n]:,.1f}" for n in names) + " | "
              + " | ".join(f"{r['ratio_to_eager'][n]:.2f}x" for n in names[1:])
              + f" | {100 * r['onnx_encoded_share']:.0f}% |")
    fractions = list(rows[0]["matmul_fraction"])
    print("\n% of the fp32 matmul rate, FLOPs of the work each backend did (--help):")
    print("| batch | " + " | ".join(fractions) + " |")
    print("|---:|" + "---:|" * len(fractions))
    for r in rows:
        print(f"| {r['batch']} | " + " | ".join(
            f"{100 * r['matmul_fraction'][n]:.1f}%"
            + (" (invalid: above the machine's rate)" if r["matmul_fraction"][n] > 1 else "")
            for n in fractions) + " |")
    for name in REDUCED:
        if f"{name}_greedy_equal_share" in rows[0]:
            print(f"\n{name}: greedy outputs equal to fp32 on the benchmark model: "
                  + ", ".join(f"batch {r['batch']} {100 * r[f'{name}_greedy_equal_share']:.1f}%"
                              for r in rows))
    if quality:
        print(f"\ntrained jump generator ({quality_export.name}), {quality['samples']} greedy "
              f"samples, correct SCAN pairs: fp32 (onnx) {100 * quality['onnx_correct_share']:.1f}%"
              + "".join(f", {n} {100 * quality[f'{n}_correct_share']:.1f}% (outputs equal to "
                        f"fp32 {100 * quality[f'{n}_greedy_equal_share']:.1f}%)"
                        for n in REDUCED if f"{n}_correct_share" in quality))


if __name__ == "__main__":
    os.environ.setdefault("COMPGEN_QUIET", "1")
    main()
