"""Sampling throughput of every backend, side by side, on one recomb-2 SCAN generator.

    .venv/bin/python scripts/bench_sampling.py [--checkpoint recomb2.pt] [--batches 1,32,256,1024]

Without --checkpoint a generator of the reference size (recombine_scan: H 512, E 64,
A 128) is initialised at random and exported; throughput does not depend on training as
long as every backend decodes the same number of steps, so decoding runs greedy for a
fixed number of steps (``--steps``, no early stop: a random model rarely emits </s>).
Prints samples/s for eager PyTorch, TorchScript (from Python), ONNX Runtime and the C++
runner, the FLOPs per sample (the matrix products of the eager model, prototype encoder
included), and the fraction of this machine's fp32 matrix-multiply rate (the best 1024^3
rate measured in the same run) each backend reaches.
"""

from __future__ import annotations

import argparse
import atexit
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from compgen.export import export_checkpoint, pad_tuples, read_prototypes
from compgen.export.cpp_runner import build_runner, run_cpp
from compgen.export.graphs import deterministic
from compgen.export.onnx_decoder import OnnxGenerator
from compgen.sampling import sample_batch


def matmul_gflops(n: int = 1024, repeats: int = 10, trials: int = 5) -> float:
    """The machine's fp32 matmul rate: the best of ``trials`` timings of n^3 products."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        a @ b
    best = 0.0
    for _ in range(trials):
        start = time.perf_counter()
        for _ in range(repeats):
            a @ b
        best = max(best, 2 * n ** 3 * repeats / (time.perf_counter() - start) / 1e9)
    return best


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


def timed(fn, min_seconds: float = 1.0) -> float:
    """Seconds per call (repeats until min_seconds have passed, after one warm-up)."""
    fn()
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / calls


def int8_copy(folder: Path, out: Path) -> Path:
    """The export folder with both ONNX graphs dynamically quantised to int8 weights
    (activations quantised per call); everything else as it is."""
    import shutil

    from onnxruntime.quantization import QuantType, quantize_dynamic

    shutil.copytree(folder, out, dirs_exist_ok=True)
    for name in ("encoder.onnx", "decoder_step.onnx"):
        quantize_dynamic(folder / name, out / name, weight_type=QuantType.QInt8)
    return out


def random_checkpoint(path: Path, data: str) -> None:
    from compgen.checkpoint import build_recombine, load_preset, save_checkpoint
    from compgen.data import load_dataset
    from compgen.data.vocab import Vocab

    config = load_preset("recombine_scan")
    config["data"] = data
    vocab = Vocab.from_table(load_dataset(data))
    torch.manual_seed(0)
    model = build_recombine(config, len(vocab))
    save_checkpoint(path, model, config, vocab, "recombine")


def _cut(row) -> list[int]:
    ids = [int(t) for t in row]
    return ids[: ids.index(2) + 1] if 2 in ids else ids  # up to </s>


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", type=Path)
    parser.add_argument("--data", default="scan/jump")
    parser.add_argument("--batches", default="1,32,256,1024")
    parser.add_argument("--steps", type=int, default=45)
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    threads = torch.get_num_threads()
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

    from compgen.checkpoint import load_generator

    model = deterministic(load_generator(checkpoint)[0])
    scripted = torch.jit.load(str(folder / "model.ts"))
    onnx = OnnxGenerator(folder, manifest)
    onnx_int8 = OnnxGenerator(int8_copy(folder, work / "export-int8"), manifest)
    tuples = read_prototypes(folder / "prototypes.txt", model.nproto)
    steps = args.steps
    # a model that never stops decodes exactly `steps` steps in every backend
    model.cfg.max_len = steps

    rows = []
    for batch in [int(b) for b in args.batches.split(",")]:
        chunk = [tuples[i % len(tuples)] for i in range(batch)]
        protos = pad_tuples(chunk, model.nproto, batch)
        z = torch.zeros(batch, model.latent)
        flops = count_flops(lambda: sample_batch(model, protos, "greedy", 1.0, steps)) / batch
        with torch.no_grad():
            produced = sample_batch(model, protos, "greedy", 1.0, steps).tokens
        real_steps = int((produced != 0).sum(1).max())

        def eager():
            with torch.no_grad():
                sample_batch(model, protos, "greedy", 1.0, steps)

        def torchscript():
            with torch.no_grad():
                scripted.decode(protos, z, steps, 1.0, 0)

        rng = np.random.default_rng(0)
        p_np, z_np = protos.numpy(), z.numpy()

        def onnxruntime():
            onnx.decode(p_np, z_np, steps, 1.0, 0, rng)

        def onnxruntime_int8():
            onnx_int8.decode(p_np, z_np, steps, 1.0, 0, rng)

        cpp_out = work / "cpp.tsv"
        n_cpp = max(batch, min(4096, 8 * batch))

        def cpp(workers: int = 1):
            return run_cpp(binary, folder, cpp_out, n=n_cpp, batch_size=batch,
                           strategy="greedy", seed=0, max_len=steps, threads=threads,
                           workers=workers)

        result = {"batch": batch, "steps": real_steps, "gflop_per_sample": flops / 1e9}
        for name, fn in (("eager", eager), ("torchscript", torchscript), ("onnx", onnxruntime),
                         ("onnx_int8", onnxruntime_int8)):
            result[name] = batch / timed(fn, args.seconds)
        # int8 quality: share of greedy samples identical to the fp32 graphs' (cut at </s>)
        fp32 = onnx.decode(p_np, z_np, steps, 1.0, 0, rng)[0]
        int8 = onnx_int8.decode(p_np, z_np, steps, 1.0, 0, rng)[0]
        result["int8_same"] = float(np.mean([_cut(a) == _cut(b) for a, b in zip(fp32, int8)]))
        # the runner reports its own rate, without process start and model load; with
        # `threads` workers it decodes that many batches of `batch` at once, 1 thread each
        for name, workers in (("cpp", 1), ("cpp_workers", threads)):
            start = time.perf_counter()
            reported = cpp(workers)
            result[name] = reported if np.isfinite(reported) else n_cpp / (time.perf_counter() - start)
        rows.append(result)
        print(f"batch {batch}: " + ", ".join(f"{k} {v:.1f}" for k, v in result.items()
                                              if isinstance(v, float)), file=sys.stderr)

    gflops_peak = max(gflops_peak, matmul_gflops())
    print(f"\nrecomb-2 SCAN generator: H {model.hidden}, vocab {model.vocab_size}, "
          f"greedy, {steps} decoder steps; torch threads {threads}; "
          f"fp32 matmul (1024^3) {gflops_peak:.1f} GFLOP/s\n")
    names = ("eager", "torchscript", "onnx", "cpp", "cpp_workers")
    print("| batch | onnx_int8 samples/s | int8 / onnx fp32 | greedy samples identical to fp32 |")
    print("|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['batch']} | {r['onnx_int8']:,.1f} | {r['onnx_int8'] / r['onnx']:.2f}x | "
              f"{100 * r['int8_same']:.1f}% |")
    print()
    print(f"cpp_workers = the C++ runner with {threads} workers (one batch of the row's size "
          "per worker, 1 intra-op thread each)\n")
    print("| batch | GFLOP/sample | " + " | ".join(f"{n} samples/s" for n in names)
          + " | onnx / eager | cpp / eager | cpp_workers / eager | best % of matmul rate |")
    print("|---:|---:|" + "---:|" * len(names) + "---:|---:|---:|---:|")
    for r in rows:
        best = max(r[n] for n in names)
        share = 100 * best * r["gflop_per_sample"] / gflops_peak
        print(f"| {r['batch']} | {r['gflop_per_sample']:.4f} | "
              + " | ".join(f"{r[n]:,.1f}" for n in names)
              + f" | {r['onnx'] / r['eager']:.2f}x | {r['cpp'] / r['eager']:.2f}x"
              + f" | {r['cpp_workers'] / r['eager']:.2f}x | {share:.1f}% |")


if __name__ == "__main__":
    os.environ.setdefault("COMPGEN_QUIET", "1")
    main()
