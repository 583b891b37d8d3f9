"""Generator training speed: examples/s of the trainer in this tree and of a base commit,
side by side in one run, at H 128, 256 and 512 (SCAN jump, recomb-2, each preset's batch
size), plus the loss both reach after the same number of updates.

    .venv/bin/python scripts/bench_train.py --base-ref COMMIT [--steps 30] [--json]
    .venv/bin/python scripts/bench_train.py --base-ref COMMIT --set length_buckets=50 --steps 300

The base trainer runs from a detached ``git worktree`` of ``--base-ref`` (created in
``--base-dir`` when missing), each trainer in its own subprocess with its own PYTHONPATH,
alternating per size. Speed is examples over the wall time of the update loop of ``--steps`` updates
after ``--warmup`` untimed ones (data encoding, model set-up and checkpoint writes excluded). The loss
is the per-token NLL of both checkpoints on the same fixed 512 training tuples, computed
here with one fixed dropout stream, so both are measured the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SIZES = [(128, "recombine_scan_cpu"), (256, "recombine_scan_h256_cpu"), (512, "recombine_scan")]
DATA = "scan/jump"
# each lever of the new trainer toggled on its own ([train] settings), for --ablate
LEVERS = {"length_buckets": 50, "unique_prototypes": False, "prefetch": False}


def cpu_flags() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                wanted = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
                return " ".join(f for f in line.split(":", 1)[1].split() if f in wanted)
    except OSError:
        pass
    return platform.processor() or "unknown"


def worker(spec: dict) -> None:
    """Runs inside a tree's PYTHONPATH: train ``warmup + steps`` updates, print JSON."""
    import torch

    from compgen import train
    from compgen.checkpoint import apply_overrides, load_preset
    from compgen.generator_data import generator_data
    from compgen.train import train_generator

    cfg = apply_overrides(load_preset(spec["preset"]),
                          {"train.threads": spec["threads"], **spec.get("overrides", {})})
    prepared = generator_data(DATA, cfg["model"]["nproto"], 0, 0.1, None)
    out = Path(spec["out"])
    quiet = {"progress": False, "log": lambda line: None, "prepared": prepared}
    train_generator(cfg, DATA, out, max_steps=spec["warmup"], **quiet)
    # time the update loop only: data encoding, model set-up and checkpoint writes excluded
    loop, timed, cpu = train._run_epochs, [], []

    def timed_loop(*a, **k):
        start, start_cpu = time.perf_counter(), time.process_time()
        try:
            return loop(*a, **k)
        finally:
            timed.append(time.perf_counter() - start)
            cpu.append(time.process_time() - start_cpu)

    train._run_epochs = timed_loop
    result = train_generator(cfg, DATA, out, resume=True, max_steps=spec["warmup"] + spec["steps"],
                             **quiet)
    print(json.dumps({"steps": result.steps, "seconds": sum(timed), "cpu_seconds": sum(cpu),
                      "batch_size": cfg["train"]["batch_size"], "threads": torch.get_num_threads()}))


def run_tree(tree: Path, spec: dict) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.run([sys.executable, __file__, "--worker", json.dumps(spec)], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"error: the trainer in {tree} failed:\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["examples_per_s"] = spec["steps"] * result["batch_size"] / result["seconds"]
    result["examples_per_cpu_s"] = spec["steps"] * result["batch_size"] / result["cpu_seconds"]
    return result


def fixed_loss(checkpoint: Path, tuples: int = 512) -> float:
    """Per-token NLL on the first ``tuples`` training tuples, one fixed dropout stream."""
    import torch

    from compgen.checkpoint import load_generator
    from compgen.generator_data import encode_items, generator_data, make_batch

    model, vocab, _ = load_generator(checkpoint)
    prepared = generator_data(DATA, model.nproto, 0, 0.1, None)
    encoded = encode_items(prepared.train[:tuples], vocab)
    torch.manual_seed(0)
    total, tokens = 0.0, 0
    with torch.no_grad():
        for s in range(0, len(encoded), 64):
            target, protos = make_batch(encoded, range(s, min(s + 64, len(encoded))), "scan",
                                        model.cfg.max_len)
            _, nll, ntok = model.loss(target, protos)
            total, tokens = total + float(nll), tokens + int(ntok)
    return total / tokens


def ensure_base(base_dir: Path, ref: str) -> Path:
    if not (base_dir / "compgen").is_dir():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base_dir), ref],
                       check=True, capture_output=True)
    return base_dir


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-ref", help="commit of the trainer to compare against")
    parser.add_argument("--base-dir", type=Path, help="its worktree (default: a temp dir)")
    parser.add_argument("--steps", type=int, default=30, help="timed updates per size")
    parser.add_argument("--warmup", type=int, default=3, help="untimed updates first")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--hidden", type=int, nargs="*", default=[h for h, _ in SIZES])
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="a [train] setting of the new trainer, e.g. length_buckets=50")
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
    unknown = sorted(set(args.hidden) - {h for h, _ in SIZES})
    if unknown or args.steps < 1 or args.warmup < 1:
        sys.exit(f"error: --hidden takes {[h for h, _ in SIZES]}, --steps and --warmup >= 1")
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
        base = ensure_base(args.base_dir or Path(tmp) / "base", args.base_ref)
        for hidden, preset in SIZES:
            if hidden not in args.hidden:
                continue
            row = {"hidden": hidden, "preset": preset}
            for name, tree in (("base", base), ("new", ROOT)):
                spec = {"preset": preset, "threads": args.threads, "steps": args.steps,
                        "warmup": args.warmup, "out": str(Path(tmp) / f"{name}{hidden}.pt"),
                        "overrides": settings if name == "new" else {}}
                result = run_tree(tree, spec)
                row[name] = {**result, "loss": fixed_loss(Path(spec["out"]))}
            for lever, off in LEVERS.items() if args.ablate else ():
                spec = {"preset": preset, "threads": args.threads, "steps": args.steps,
                        "warmup": args.warmup, "out": str(Path(tmp) / f"{lever}{hidden}.pt"),
                        "overrides": {**settings, f"train.{lever}": off}}
                row.setdefault("toggled", {})[lever] = run_tree(ROOT, spec)["examples_per_s"]
            row["speedup"] = row["new"]["examples_per_s"] / row["base"]["examples_per_s"]
            row["cpu_speedup"] = row["new"]["examples_per_cpu_s"] / row["base"]["examples_per_cpu_s"]
            row["loss_rel_diff"] = row["new"]["loss"] / row["base"]["loss"] - 1
            rows.append(row)
        if args.base_dir is None:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                           check=False, capture_output=True)
    report = {"base_ref": args.base_ref, "new_settings": settings, "steps": args.steps,
              "warmup": args.warmup,
              "threads": args.threads, "cpu_flags": cpu_flags(), "cores": os.cpu_count(),
              "python": platform.python_version(), "rows": rows}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"generator training, {DATA} recomb-2, base {args.base_ref}, {args.steps} timed "
          f"updates after {args.warmup}, {args.threads} thread(s); CPU flags: {report['cpu_flags']}"
          + (f"; new trainer with {settings}" if settings else ""))
    print()
    print("| H | preset | batch | base ex/s | new ex/s | speed-up | CPU-time speed-up | base loss | "
          "new loss | diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        b, n = r["base"], r["new"]
        print(f"| {r['hidden']} | {r['preset']} | {b['batch_size']} | {b['examples_per_s']:.1f} | "
              f"{n['examples_per_s']:.1f} | {r['speedup']:.2f}x | {r['cpu_speedup']:.2f}x | "
              f"{b['loss']:.4f} | "
              f"{n['loss']:.4f} | {100 * r['loss_rel_diff']:+.1f} % |")
    if args.ablate:
        print()
        print("| H | new ex/s | " + " | ".join(f"{lever} = {value}" for lever, value in LEVERS.items())
              + " |")
        print("|---|---|" + "---|" * len(LEVERS))
        for r in rows:
            print(f"| {r['hidden']} | {r['new']['examples_per_s']:.1f} | " + " | ".join(
                f"{r['toggled'][lever]:.1f}" for lever in LEVERS) + " |")


if __name__ == "__main__":
    main()
