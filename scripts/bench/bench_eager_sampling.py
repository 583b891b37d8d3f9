"""Eager PyTorch baseline: training throughput (examples/s) and sampling throughput
(samples/s at batch 1, 32, 256) of a generator checkpoint. Prints a Markdown table.

    .venv/bin/python scripts/bench/bench_eager_sampling.py recomb2.pt [--threads 1] [--train-steps 20]

Sampling decodes prototype tuples drawn from the checkpoint's Omega with the full
45-step budget per batch (sequences stop early only when the whole batch has ended),
without filtering. Training runs ``--train-steps`` updates at the preset's batch size.
"""

from __future__ import annotations

import argparse
import time

import torch

from compgen.data import load_dataset
from compgen.models.recombine import collate_prototypes
from compgen.neighborhoods.omega_source import prototype_source
from compgen.runtimes.eager import decode_batch
from compgen.training.checkpoint import build_recombine, load_generator
from compgen.training.generator_data import encode_items, generator_data, make_batch


def bench_sampling(model, vocab, draw, batch: int, strategy: str, temperature: float,
                   min_seconds: float, max_len: int) -> float:
    done, start = 0, time.perf_counter()
    while True:
        tuples = draw(batch)
        protos = collate_prototypes([[vocab.encode(p) for p in t] for t in tuples],
                                    "scan" if model.scan else "sig", max_len)
        decode_batch(model, protos, strategy, temperature, max_len)
        done += batch
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds and done >= batch * 2:
            return done / elapsed


def bench_training(config: dict, steps: int, seed: int) -> tuple[float, int]:
    model_cfg = config["model"]
    data = generator_data(config["data"], int(model_cfg["nproto"]), seed)
    encoded = encode_items(data.train, data.vocab)
    model = build_recombine(config, len(data.vocab))
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=float(config["train"].get("lr", 0.002)))
    B = int(config["train"].get("batch_size", 32))
    g = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(encoded), generator=g).tolist()
    n, start = 0, None
    for step in range(steps + 1):
        if step == 1:  # the first update warms up allocators; not timed
            start, n = time.perf_counter(), 0
        idx = order[step * B:(step + 1) * B]
        target, protos = make_batch(encoded, idx, data.task, int(model_cfg.get("max_len", 45)))
        loss, _, _ = model.loss(target, protos)
        opt.zero_grad()
        loss.backward()
        if config["train"].get("gradnorm", 0):
            torch.nn.utils.clip_grad_norm_(model.parameters(), float(config["train"]["gradnorm"]))
        opt.step()
        n += len(idx)
    return n / (time.perf_counter() - start), B


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batches", default="1,32,256")
    ap.add_argument("--strategies", default="greedy,mixed,beam")
    ap.add_argument("--temperature", type=float, default=0.5)
    ap.add_argument("--seconds", type=float, default=5.0, help="minimum time per cell")
    ap.add_argument("--train-steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    model, vocab, config = load_generator(args.checkpoint)
    table = load_dataset(config["data"])
    draw = prototype_source(config, table, model.nproto, args.seed,
                            config.get("sample", {}).get("resample", "none"))
    m = config["model"]
    print(f"checkpoint {args.checkpoint}: {config['data']}, {m['variant']} nproto {m['nproto']}, "
          f"H {m['hidden']} E {m['embed']} A {m['attdim']}, vocab {len(vocab)}, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters, torch threads {args.threads}\n")

    rows = []
    if args.train_steps > 0:
        speed, B = bench_training(config, args.train_steps, args.seed)
        rows.append(("train (teacher forcing + backward + Adam)", f"{B}", f"{speed:,.1f} examples/s"))
    for strategy in args.strategies.split(","):
        for batch in (int(b) for b in args.batches.split(",")):
            speed = bench_sampling(model, vocab, draw, batch, strategy, args.temperature,
                                   args.seconds, m.get("max_len", 45))
            rows.append((f"sample {strategy}" + (" (width 4)" if strategy == "beam" else ""),
                         str(batch), f"{speed:,.1f} samples/s"))
    print("| eager PyTorch | batch | throughput |")
    print("|---|---:|---:|")
    for r in rows:
        print(f"| {r[0]} | {r[1]} | {r[2]} |")


if __name__ == "__main__":
    main()
