"""Predictor training speed: examples/s of the trainer's update (the packed loss of
``compgen.models.seq2seq_training`` and fused Adam) against the reference computation
(``Seq2Seq.loss``, ``packed_decoder = false``, and Adam's per-tensor loop, the trainer
before the packed loss), side by side in one process, at H 128, 256 and
512 (the presets seq2seq_scan_cpu, seq2seq_scan_h256_cpu and seq2seq_scan), on the
batches the trainer draws; and the training loss both reach after the same updates.

    .venv/bin/python scripts/bench/bench_predictor_train.py [--threads 2] [--json]
    .venv/bin/python scripts/bench/bench_predictor_train.py --augment samples.tsv --p-aug 0.2 --loss-updates 200

Speed: ``--rounds`` alternating runs of both computations per size, each timing
``--steps`` optimizer updates (``train_seq2seq.update``: batch encoding, loss, backward,
clipping, Adam) after ``--warmup`` untimed ones; medians, in examples per second of wall
time and per CPU-second of the process. Loss (``--loss-updates`` N > 0): from each seed of
``--seeds``, the same initial weights train N updates on the same batches with each
computation; the loss is then ``Seq2Seq.loss`` without dropout on 512 fixed training
pairs, the same measurement for both; the reference trained once more with other dropout
draws (seed + 1000) shows how far two runs end apart by their draws alone, since the
packed loss draws its dropout masks in another order. Prints the CPU flags and the load average.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import os
import statistics
import time

import torch

from compgen.data import load_dataset
from compgen.data.sources import resolve_data_dir
from compgen.data.vocab import Vocab
from compgen.models.seq2seq import Seq2Seq, Seq2SeqConfig, collate
from compgen.system.precision import cpu_flags
from compgen.training.predictor import (
    MixedStream,
    conditional_pairs,
    load_preset,
    read_augmented,
    split_train_dev,
    update,
)

# the flags that decide how fast fp32 / bf16 products run
SPEED_FLAGS = ("avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
PRESETS = {128: "seq2seq_scan_cpu", 256: "seq2seq_scan_h256_cpu", 512: "seq2seq_scan"}
COMPUTATIONS = {"reference": False, "packed": True}  # name -> packed_decoder


def build(hidden: int, vocab: Vocab, seed: int):
    model_opts, tcfg = load_preset(PRESETS[hidden])
    torch.manual_seed(seed)
    model = Seq2Seq(Seq2SeqConfig.from_dict({**model_opts, "vocab_size": len(vocab)}))
    return model, tcfg


def run_updates(model, tcfg, vocab, batches, packed: bool) -> tuple[float, float]:
    """Seconds (wall, CPU) of one update per batch with the chosen computation."""
    tcfg = dataclasses.replace(tcfg, packed_decoder=packed)
    optimizer = torch.optim.Adam(model.parameters(), lr=tcfg.lr, fused=packed)
    model.train()
    wall, cpu = time.perf_counter(), time.process_time()
    for batch in batches:
        update(model, optimizer, vocab, batch, tcfg)
    return time.perf_counter() - wall, time.process_time() - cpu


@torch.no_grad()
def held_loss(model: Seq2Seq, vocab: Vocab, pairs) -> float:
    model.eval()
    losses = []
    for i in range(0, len(pairs), 64):
        chunk = pairs[i:i + 64]
        source = collate([vocab.encode(x) for x, _ in chunk], model.cfg.max_len)
        target = collate([vocab.encode(y) for _, y in chunk], model.cfg.max_len)
        losses.append(float(model.loss(source, target)))
    return statistics.fmean(losses)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="scan/around_right")
    ap.add_argument("--augment", default=None, help="samples TSV mixed in as the trainer does")
    ap.add_argument("--p-aug", type=float, default=0.2)
    ap.add_argument("--hidden", type=int, nargs="+", default=sorted(PRESETS), choices=sorted(PRESETS))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loss-updates", type=int, default=0)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    table = load_dataset(args.data, resolve_data_dir(None))
    train, _ = split_train_dev(table, 0.05, 0)
    vocab = Vocab.build([t for x, y in conditional_pairs(table) for t in (x, y)])
    augmented = read_augmented(args.augment, False) if args.augment else []
    held_out = train[:512]
    load_before = os.getloadavg()[0]
    rows = []
    for hidden in args.hidden:
        model, tcfg = build(hidden, vocab, 0)
        stream = MixedStream(train, augmented, args.p_aug if augmented else 0.0, 0)
        warm = [stream.take(tcfg.batch_size) for _ in range(args.warmup)]
        timed = [stream.take(tcfg.batch_size) for _ in range(args.steps)]
        speed = {name: {"wall": [], "cpu": []} for name in COMPUTATIONS}
        for _ in range(args.rounds):
            for name, packed in COMPUTATIONS.items():
                run_updates(model, tcfg, vocab, warm, packed)
                wall, cpu = run_updates(model, tcfg, vocab, timed, packed)
                examples = args.steps * tcfg.batch_size
                speed[name]["wall"].append(examples / wall)
                speed[name]["cpu"].append(examples / cpu)
        row = {"hidden": hidden, "preset": PRESETS[hidden], "batch_size": tcfg.batch_size}
        for name in COMPUTATIONS:
            row[f"{name}_examples_per_s"] = round(statistics.median(speed[name]["wall"]), 1)
            row[f"{name}_examples_per_cpu_s"] = round(statistics.median(speed[name]["cpu"]), 1)
        row["speedup"] = round(row["packed_examples_per_s"] / row["reference_examples_per_s"], 2)
        if args.loss_updates:
            losses: dict[str, list[float]] = {}
            for seed in args.seeds:
                initial, _ = build(hidden, vocab, seed)
                stream = MixedStream(train, augmented, args.p_aug if augmented else 0.0, seed)
                batches = [stream.take(tcfg.batch_size) for _ in range(args.loss_updates)]
                # the reference once more with other dropout draws: how far two runs that
                # differ only in their draws end apart (the packed loss draws in another order)
                for name, packed, stream_seed in (("reference", False, seed), ("packed", True, seed),
                                                  ("redrawn", False, seed + 1000)):
                    trained = copy.deepcopy(initial)
                    torch.manual_seed(stream_seed)
                    run_updates(trained, tcfg, vocab, batches, packed)
                    losses.setdefault(name, []).append(held_loss(trained, vocab, held_out))
            for name, values in losses.items():
                row[f"{name}_loss"] = round(statistics.fmean(values), 4)
            row["loss_difference"] = round(row["packed_loss"] / row["reference_loss"] - 1, 4)
            row["redrawn_difference"] = round(row["redrawn_loss"] / row["reference_loss"] - 1, 4)
        rows.append(row)
    result = {"cpu_flags": [f for f in SPEED_FLAGS if f in cpu_flags()], "threads": args.threads, "data": args.data,
              "augment": args.augment, "steps": args.steps, "rounds": args.rounds,
              "loss_updates": args.loss_updates, "seeds": args.seeds,
              "load_average": [load_before, os.getloadavg()[0]], "rows": rows}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print(f"CPU flags: {' '.join(result['cpu_flags'])}; {args.threads} threads; load average "
          f"{load_before:.1f} -> {os.getloadavg()[0]:.1f}; {args.data}"
          + (f" + {args.augment} (p_aug {args.p_aug})" if args.augment else ""))
    print()
    head = "| H | preset | reference ex/s | packed ex/s | speed-up | ex/CPU-s ref / packed |"
    if args.loss_updates:
        head += (f" loss after {args.loss_updates} updates ref / packed | difference | the reference "
                 "with other dropout draws: difference |")
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for r in rows:
        line = (f"| {r['hidden']} | {r['preset']} | {r['reference_examples_per_s']} | "
                f"{r['packed_examples_per_s']} | {r['speedup']}x | "
                f"{r['reference_examples_per_cpu_s']} / {r['packed_examples_per_cpu_s']} |")
        if args.loss_updates:
            line += (f" {r['reference_loss']} / {r['packed_loss']} | "
                     f"{100 * r['loss_difference']:+.2f} % | {100 * r['redrawn_difference']:+.2f} % |")
        print(line)


if __name__ == "__main__":
    main()
