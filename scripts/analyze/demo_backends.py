"""Sample an export folder on every backend and print one row per backend: samples, time,
samples/s, and the share of novel and of correct SCAN pairs (judged by the full SCAN
grammar, as `compgen sample` does), with the command that reproduces each row. The C++
runner's first build is its own column ("build s"), not sampling time.

    python scripts/analyze/demo_backends.py exported/scan-jump-recomb2 --n 60 --nsamples 225 --resample rare
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from compgen.sampling.collection import Tally, scan_quality
from compgen.sampling.run import BACKENDS, sample_export


def sample_every_backend(folder: Path, n: int, threads: int, out_dir: Path | None,
                         backends=BACKENDS, nsamples: int | None = None,
                         resample: str | None = None, log=lambda line: None) -> list[dict]:
    rows = []
    for backend in backends:
        out = out_dir / f"samples.{backend}.tsv" if out_dir else None
        start = time.perf_counter()
        tally = Tally()
        run = sample_export(folder, n=n, backend=backend, threads=threads, out=out, log=log,
                            nsamples=nsamples, resample=resample, tally=tally)
        wall = time.perf_counter() - start
        quality = scan_quality(run) or {}
        rows.append({
            "backend": backend, "samples": len(run.samples),
            "sampling_seconds": round(run.seconds, 2), "wall_seconds": round(wall, 2),
            "build_seconds": round(run.build_seconds, 2),
            "samples_per_second": round(len(run.samples) / max(run.seconds, 1e-9), 2),
            "decoded": tally.decoded, "acceptance": tally.accepted / max(tally.decoded, 1),
            "novel_share": quality.get("novel_share"),
            "correct_share": quality.get("correct_share"),
            "command": (f"python -m compgen sample {folder} --backend {backend} --n {n} "
                        + (f"--nsamples {nsamples} " if nsamples else "")
                        + (f"--resample {resample} " if resample else "")
                        + f"--threads {threads}" + (f" -o {out}" if out else "")),
        })
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--nsamples", type=int, help="accepted before keeping the n most probable")
    parser.add_argument("--resample", help="none | rare (SCAN jump: keep commands with 'jump')")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out-dir", type=Path, help="write samples.<backend>.tsv here")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    rows = sample_every_backend(args.folder, args.n, args.threads, args.out_dir,
                                args.backends.split(","), args.nsamples, args.resample)
    kept = f"the {args.n} most probable of {args.nsamples}" if args.nsamples else f"{args.n}"
    table = Table(title=f"{args.folder}: {kept} beam samples per backend")
    for col in ("backend", "samples", "decoded", "accepted", "seconds", "samples/s", "novel",
                "correct", "build s"):
        table.add_column(col, justify="left" if col == "backend" else "right")
    for r in rows:
        table.add_row(r["backend"], str(r["samples"]), f"{r['decoded']:,}",
                      f"{r['acceptance']:.1%}", f"{r['sampling_seconds']:.1f}",
                      f"{r['samples_per_second']:.1f}", f"{r['novel_share']:.1%}",
                      f"{r['correct_share']:.1%}",
                      f"{r['build_seconds']:.0f}" if r["build_seconds"] >= 1 else "-")
    console = Console()
    console.print(table)
    console.print("reproduce one row:  " + rows[0]["command"].replace(f"--backend {rows[0]['backend']}",
                                                                      "--backend onnx|torchscript|cpp|torch"),
                  highlight=False, markup=False, soft_wrap=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
