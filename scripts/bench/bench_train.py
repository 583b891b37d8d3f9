"""Generator training speed: examples/s of the trainer in this tree and of a base commit,
side by side in one run, at H 128, 256 and 512 (SCAN jump, recomb-2, each preset's batch
size) and, with ``--hidden 1024``, the reference's SIGMORPHON generator (swahili hints 8,
recomb-1, H 1024), and the training loss both reach after the same number of updates.

    .venv/bin/python scripts/bench/bench_train.py --base-ref COMMIT [--threads 2] [--json]
    .venv/bin/python scripts/bench/bench_train.py --base-ref COMMIT --hidden 512 --loss-updates 300 --seeds 0 1 2

The base trainer runs from a detached ``git worktree`` of ``--base-ref`` (created in
``--base-dir`` when missing), each trainer in its own subprocess with its own PYTHONPATH.
Speed: ``--rounds`` alternating runs of both trainers per size, each timing the update loop
of ``--steps`` updates after ``--warmup`` untimed ones (data encoding, model set-up and
checkpoint writes excluded); the medians are reported, as examples per second of wall time
and per CPU-second of the process (the latter barely moves when other processes share the
cores). Loss (``--loss-updates`` N > 0): each trainer trains N updates from each seed of
``--seeds`` (same initial weights and batch order for both); the loss is the per-token NLL
of each checkpoint on the same fixed 512 training tuples, computed here with one fixed
dropout stream, so both are measured the same way. The load average is printed with the
figures; the base trainer is fp32, the new one trains in its default precision (bf16
where the CPU has bf16 units).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _harness import (
    ROOT,
    alternating,
    base_tree,
    cpu_flags,
    import_moved,
    load_average,
    remove_tree,
    tree_env,
)

SIZES = {128: ("recombine_scan_cpu", "scan/jump"), 256: ("recombine_scan_h256_cpu", "scan/jump"),
         512: ("recombine_scan", "scan/jump"),
         1024: ("recombine_sig", "sigmorphon/swahili/hints-8.0")}
DEFAULT_SIZES = [128, 256, 512]
# each lever of the new trainer toggled on its own ([train] settings), for --ablate
LEVERS = {"native_loops": False, "fused_decoder": False, "packed_encoder": False,
          "unique_prototypes": False, "precision": "fp32", "prefetch": False}


CPU_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")


def profile_split(train) -> dict:
    """Wraps the trainer's pieces (in this tree or the base's) with CPU-time counters of
    the thread each runs in: collation, loss forward (of which the prototype encoder),
    backward (the part after the encoder outputs' gradients are ready is the encoder's),
    gradient clipping + Adam. Returns the dict the counters add to."""
    import torch

    from compgen.models.recombine import Recombine

    split = {"collation": 0.0, "forward": 0.0, "forward: encoder": 0.0, "backward": 0.0,
             "backward: encoder": 0.0, "clip + Adam": 0.0}
    ready = []  # thread time when the encoder outputs' gradient arrived, this step

    def counted(name, fn, encoder=False):
        def run(*args, **kwargs):
            start = time.thread_time()
            out = fn(*args, **kwargs)
            split[name] += time.thread_time() - start
            if encoder and torch.is_grad_enabled():
                out[0].register_hook(lambda grad: ready.append(time.thread_time()))
            return out
        return run

    def backward(tensor, *args, **kwargs):
        ready.clear()
        start = time.thread_time()
        tensor_backward(tensor, *args, **kwargs)
        end = time.thread_time()
        split["backward"] += end - start
        split["backward: encoder"] += end - (ready[0] if ready else end)

    train.make_batch = counted("collation", train.make_batch)
    if hasattr(train, "training_loss"):  # this tree's fast loss
        from compgen.models import scan_training
        train.training_loss = counted("forward", train.training_loss)
        scan_training._encode = counted("forward: encoder", scan_training._encode, True)
    else:  # the base trainer's reference loss
        Recombine.loss = counted("forward", Recombine.loss)
        Recombine._encode_prototypes = counted("forward: encoder", Recombine._encode_prototypes,
                                               True)
    tensor_backward = torch.Tensor.backward
    torch.Tensor.backward = backward
    torch.nn.utils.clip_grad_norm_ = counted("clip + Adam", torch.nn.utils.clip_grad_norm_)
    torch.optim.Adam.step = counted("clip + Adam", torch.optim.Adam.step)
    return split


def worker(spec: dict) -> None:
    """Runs inside a tree's PYTHONPATH: train ``warmup`` updates, then ``steps`` timed
    ones (if any), print JSON."""
    import torch

    # this tree's module paths first, then those of trees from before the training package
    train = import_moved("compgen.training.generator", "compgen.train")
    checkpoint = import_moved("compgen.training.checkpoint", "compgen.checkpoint")
    generator_data = import_moved("compgen.training.generator_data",
                                  "compgen.generator_data").generator_data
    apply_overrides, load_preset = checkpoint.apply_overrides, checkpoint.load_preset
    train_generator = train.train_generator

    cfg = apply_overrides(load_preset(spec["preset"]),
                          {"train.threads": spec["threads"], "train.seed": spec["seed"],
                           **spec.get("overrides", {})})
    data = spec["data"]
    prepared = generator_data(data, cfg["model"]["nproto"], 0, 0.1, None)
    out = Path(spec["out"])
    quiet = {"progress": False, "log": lambda line: None, "prepared": prepared}
    train_generator(cfg, data, out, max_steps=spec["warmup"], **quiet)
    # time the update loop only: data encoding, model set-up and checkpoint writes excluded
    loop, timed, cpu = train._run_epochs, [0.0], [0.0]

    def timed_loop(*a, **k):
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            return loop(*a, **k)
        finally:
            timed.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)

    split = profile_split(train) if spec.get("profile") else None
    if spec["steps"]:
        train._run_epochs = timed_loop
        train_generator(cfg, data, out, resume=True, max_steps=spec["warmup"] + spec["steps"],
                        **quiet)
    print(json.dumps({"seconds": sum(timed), "cpu_seconds": sum(cpu), "split": split,
                      "batch_size": cfg["train"]["batch_size"], "threads": torch.get_num_threads()}))


def run_tree(tree: Path, spec: dict) -> dict:
    proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], env=tree_env(tree),
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"error: the trainer in {tree} failed:\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    if spec["steps"]:
        examples = spec["steps"] * result["batch_size"]
        result["examples_per_s"] = examples / result["seconds"]
        result["examples_per_cpu_s"] = examples / result["cpu_seconds"]
    return result


def fixed_loss(checkpoint: Path, data: str, tuples: int = 512) -> float:
    """Per-token NLL on the first ``tuples`` training tuples, one fixed dropout stream."""
    import torch

    from compgen.training.checkpoint import load_generator
    from compgen.training.generator_data import encode_items, generator_data, make_batch

    model, vocab, _ = load_generator(checkpoint)
    prepared = generator_data(data, model.nproto, 0, 0.1, None)
    encoded = encode_items(prepared.train[:tuples], vocab)
    torch.manual_seed(0)
    total, tokens = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(encoded), 64):
            target, protos = make_batch(encoded, range(s, min(s + 64, len(encoded))), model.cfg.variant,
                                        model.cfg.max_len)
            _, nll, ntok = model.loss(target, protos)
            total, tokens = total + float(nll), tokens + int(ntok)
    return total / tokens


def speed_row(args, preset: str, data: str, trees: dict, settings: dict, tmp: Path) -> dict:
    """``--rounds`` alternating timings of both trainers (medians), plus --ablate."""
    runs: dict[str, list] = {name: [] for name in trees}
    load_before = load_average()
    for turn in range(args.rounds):
        for name in alternating(list(trees), turn):
            tree = trees[name]
            spec = {"preset": preset, "data": data, "threads": args.threads, "steps": args.steps, "seed": 0,
                    "warmup": args.warmup, "out": str(tmp / f"{name}.pt"),
                    "overrides": settings if name == "new" else {}}
            runs[name].append(run_tree(tree, spec))
    row = {name: {"batch_size": r[0]["batch_size"], "rounds": r,
                  "examples_per_s": statistics.median(x["examples_per_s"] for x in r),
                  "examples_per_cpu_s": statistics.median(x["examples_per_cpu_s"] for x in r)}
           for name, r in runs.items()}
    row["speedup"] = row["new"]["examples_per_s"] / row["base"]["examples_per_s"]
    row["cpu_speedup"] = row["new"]["examples_per_cpu_s"] / row["base"]["examples_per_cpu_s"]
    if args.profile:  # one more run of each, instrumented
        for name, tree in trees.items():
            spec = {"preset": preset, "data": data, "threads": args.threads, "steps": args.steps, "seed": 0,
                    "warmup": args.warmup, "out": str(tmp / f"{name}.pt"), "profile": True,
                    "overrides": settings if name == "new" else {}}
            result = run_tree(tree, spec)
            row[name]["profile"] = {k: 1000 * v / args.steps for k, v in result["split"].items()}
            row[name]["profile"]["update (CPU, all threads)"] = 1000 * result["cpu_seconds"] / args.steps
    for lever, off in LEVERS.items() if args.ablate else ():
        spec = {"preset": preset, "data": data, "threads": args.threads, "steps": args.steps, "seed": 0,
                "warmup": args.warmup, "out": str(tmp / f"{lever}.pt"),
                "overrides": {**settings, f"train.{lever}": off}}
        row.setdefault("toggled", {})[lever] = run_tree(trees["new"], spec)["examples_per_s"]
    row["load"] = f"{load_before} -> {load_average()}"
    return row


def loss_row(args, preset: str, data: str, trees: dict, settings: dict, tmp: Path) -> dict:
    """Both trainers' loss after ``--loss-updates`` updates from each seed."""
    losses: dict[str, list] = {name: [] for name in trees}
    for seed in args.seeds:
        for name, tree in trees.items():
            out = tmp / f"loss-{name}-{seed}.pt"
            run_tree(tree, {"preset": preset, "data": data, "threads": args.threads, "steps": 0, "seed": seed,
                            "warmup": args.loss_updates, "out": str(out),
                            "overrides": settings if name == "new" else {}})
            losses[name].append(fixed_loss(out, data))
    diffs = [n / b - 1 for n, b in zip(losses["new"], losses["base"])]
    return {"updates": args.loss_updates, "seeds": args.seeds, "base": losses["base"],
            "new": losses["new"], "rel_diffs": diffs, "mean_rel_diff": statistics.mean(diffs),
            "sd_rel_diff": statistics.stdev(diffs) if len(diffs) > 1 else None}


def mean_sd(values: list[float], digits: int = 4) -> str:
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def print_report(report: dict) -> None:
    settings = report["new_settings"]
    print(f"generator training, base {report['base_ref']}, {report['threads']} "
          f"thread(s), {report['cores']} cores; CPU flags: {report['cpu_flags']}"
          + (f"; new trainer with {settings}" if settings else ""))
    print(f"speed: median of {report['rounds']} alternating rounds of {report['steps']} timed "
          f"updates after {report['warmup']}")
    print()
    print("| H | preset | data | batch | base ex/s | new ex/s | speed-up | speed-up in CPU time | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in report["rows"]:
        b, n = r["base"], r["new"]
        print(f"| {r['hidden']} | {r['preset']} | {r['data']} | {b['batch_size']} | {b['examples_per_s']:.1f} | "
              f"{n['examples_per_s']:.1f} | {r['speedup']:.2f}x | {r['cpu_speedup']:.2f}x | "
              f"{r['load']} |")
    if any("loss" in r for r in report["rows"]):
        print()
        print("| H | updates | seeds | base loss | new loss | new / base - 1 |")
        print("|---|---|---|---|---|---|")
        for r in report["rows"]:
            if "loss" in r:
                x = r["loss"]
                diff = [100 * d for d in x["rel_diffs"]]
                print(f"| {r['hidden']} | {x['updates']} | {' '.join(map(str, x['seeds']))} | "
                      f"{mean_sd(x['base'])} | {mean_sd(x['new'])} | {mean_sd(diff, 1)} % |")
    if any("profile" in r["new"] for r in report["rows"]):
        print()
        print("CPU ms per update (thread CPU time; collation runs beside the update in the new "
              "trainer):")
        print()
        print("| H | part | base | new |")
        print("|---|---|---|---|")
        for r in report["rows"]:
            for part in r["new"]["profile"]:
                print(f"| {r['hidden']} | {part} | {r['base']['profile'][part]:.1f} | "
                      f"{r['new']['profile'][part]:.1f} |")
    if any("toggled" in r for r in report["rows"]):
        print()
        print("| H | new ex/s | " + " | ".join(f"{lever} = {value}" for lever, value in LEVERS.items())
              + " |")
        print("|---|---|" + "---|" * len(LEVERS))
        for r in report["rows"]:
            print(f"| {r['hidden']} | {r['new']['examples_per_s']:.1f} | " + " | ".join(
                f"{r['toggled'][lever]:.1f}" for lever in LEVERS) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-ref", help="commit of the trainer to compare against")
    parser.add_argument("--base-dir", type=Path, help="its worktree (default: a temp dir)")
    parser.add_argument("--steps", type=int, default=30, help="timed updates per round")
    parser.add_argument("--warmup", type=int, default=3, help="untimed updates first")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timings per size")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--hidden", type=int, nargs="*", default=DEFAULT_SIZES,
                        help=f"sizes among {sorted(SIZES)} (1024: the SIGMORPHON generator)")
    parser.add_argument("--loss-updates", type=int, default=0,
                        help="also compare the loss after this many updates (0: no)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="for the loss")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a [train] setting of the new trainer, e.g. pad_chains=4")
    parser.add_argument("--profile", action="store_true",
                        help="also split each trainer's update into its parts (CPU time)")
    parser.add_argument("--ablate", action="store_true",
                        help="also time the new trainer with each lever toggled (no loss)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(json.loads(args.worker))
        return
    if not args.base_ref:
        sys.exit("error: --base-ref COMMIT is required")
    unknown = sorted(set(args.hidden) - set(SIZES))
    if unknown or min(args.steps, args.warmup, args.rounds) < 1 or args.loss_updates < 0:
        sys.exit(f"error: --hidden takes {sorted(SIZES)}; --steps, --warmup and "
                 "--rounds >= 1; --loss-updates >= 0")
    settings = {}
    for item in args.set:
        key, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"error: --set {item!r}: expected KEY=VALUE")
        settings[f"train.{key}"] = json.loads(value) if value[:1] in "0123456789-tf[" else value
    sys.path.insert(0, str(ROOT))
    import torch

    torch.set_num_threads(args.threads)  # the loss evaluations here, as the trainers
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench_train.") as tmp:
        base = base_tree(args.base_ref, args.base_dir or Path(tmp) / "base")
        trees = {"base": base, "new": ROOT}
        for hidden in sorted(args.hidden):
            preset, data = SIZES[hidden]
            row = {"hidden": hidden, "preset": preset, "data": data,
                   **speed_row(args, preset, data, trees, settings, Path(tmp))}
            if args.loss_updates:
                row["loss"] = loss_row(args, preset, data, trees, settings, Path(tmp))
            rows.append(row)
        if args.base_dir is None:
            remove_tree(base)
    report = {"base_ref": args.base_ref, "new_settings": settings, "steps": args.steps,
              "warmup": args.warmup, "rounds": args.rounds, "threads": args.threads,
              "cpu_flags": cpu_flags(CPU_FLAGS), "cores": os.cpu_count(),
              "python": platform.python_version(), "rows": rows}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_report(report)


if __name__ == "__main__":
    main()
