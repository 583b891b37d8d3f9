#!/usr/bin/env bash
# The GPU path checked on a machine with an NVIDIA GPU, in about 6 minutes, offline:
#   1. the machine report (compgen env);
#   2. generator training examples/s, recombine_scan (H 512) on cuda: the preset's batch
#      (32) in bf16 and fp32, and batch 512 in bf16;
#   3. the predictor trained one epoch on cuda;
#   4. the shipped export sampled with --backend torch on cuda vs the CPU (2 threads):
#      greedy outputs equal?, samples/s at batch 1024 (cuda also 4096, 16384), and the
#      CLI's samples files compared;
#   5. CUDA_VISIBLE_DEVICES= : --device auto reports cpu, --device cuda exits 2;
#   6. the CPU leg of 2: the same training on the CPU, 2 threads, and the speed-ups.
# Without a GPU it says so and runs the CPU parts and the checks of 5 quickly.
#
# Usage: scripts/gpu_check.sh            (python: $PYTHON, else .venv/bin/python, else python3)
# Env:   UPDATES (200), CPU_UPDATES (200 with a GPU, 10 without), CPU_SECONDS (60),
#        CPU_LEG (1; 0 skips 6), BATCH (1024; 128 without a GPU)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
[ -z "$PY" ] && { [ -x .venv/bin/python ] && PY=.venv/bin/python || PY=python3; }
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
work=$(mktemp -d -t compgen-gpu-check-XXXXXX)
trap 'rm -rf "$work"' EXIT
section() { printf '\n== %s\n' "$*"; }
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

section "machine"
timeout 120 "$PY" -m compgen env || fail "compgen env"
if "$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  gpu=1
else
  gpu=0
  echo "no GPU: torch sees none; the cuda figures are skipped, the CPU parts run short"
fi
UPDATES=${UPDATES:-200}
CPU_UPDATES=${CPU_UPDATES:-$([ "$gpu" = 1 ] && echo 200 || echo 10)}
BATCH=${BATCH:-$([ "$gpu" = 1 ] && echo 1024 || echo 128)}

# examples/s from the trainer's summary line ("..., 1234.5 examples/s on cuda:0 bf16)")
speed() { grep -o '[0-9.]* examples/s on [^)]*' "$1" | tail -1; }

train() {  # train NAME DEVICE UPDATES [more flags]: one recombine_scan (H 512) run
  local name=$1 device=$2 updates=$3; shift 3
  timeout 300 "$PY" -m compgen train generator --data scan/jump --config recombine_scan \
    -o "$work/$name.pt" --max-steps "$updates" --device "$device" --quiet "$@" \
    > "$work/$name.log" 2>&1 || fail "training $name (tail: $(tail -8 "$work/$name.log"))"
  echo "$name: $(speed "$work/$name.log") ($updates updates)"
}

if [ "$gpu" = 1 ]; then
  section "generator training on cuda: recombine_scan (H 512), scan/jump"
  train cuda-b32-bf16 cuda "$UPDATES" --precision bf16          # the preset's batch (32)
  train cuda-b32-fp32 cuda "$UPDATES" --precision fp32
  train cuda-b512-bf16 cuda "$UPDATES" --precision bf16 --batch-size 512

  section "predictor: one epoch on cuda (scan/jump, the CPU preset)"
  timeout 180 "$PY" -m compgen train predictor --data scan/jump --epochs 1 --device cuda \
    -o "$work/p-cuda.pt" > "$work/pred.log" 2>&1 \
    || fail "cuda predictor (tail: $(tail -8 "$work/pred.log"))"
  grep "^wrote" "$work/pred.log"
fi

section "sampling the shipped export with --backend torch (greedy, batch $BATCH)"
devices="cpu"
[ "$gpu" = 1 ] && devices="cuda cpu"
timeout 300 "$PY" - "$BATCH" $devices <<'EOF' || fail "sampling speed / equality"
import sys, time
from pathlib import Path

import numpy as np
import torch

from compgen.runtimes.artifact import load_manifest
from compgen.decoding.options import SampleOptions
from compgen.sampling.run import ExportDecoder

folder = Path("exported/scan-jump-recomb2")
manifest = load_manifest(folder)
batch, devices = int(sys.argv[1]), sys.argv[2:]
stored = manifest.prototypes      # sample i decodes stored tuple i
rows, rates = {}, {}
for device in devices:
    threads = 2 if device == "cpu" else None      # the CPU as on the project's machine
    sizes = [batch] if device == "cpu" else [batch, 4 * batch, 16 * batch]
    for size in sizes:
        options = SampleOptions(strategy="greedy", batch_size=size, device=device,
                                threads=threads)
        decode = ExportDecoder(folder, manifest, "torch", options)
        decode(np.arange(32) % stored, "greedy", 1.0, 0)        # warm-up
        idx = np.arange(size) % stored
        runs = 1 if device == "cpu" else 3
        tic = time.perf_counter()
        for _ in range(runs):
            out = decode(idx, "greedy", 1.0, 0)
        if device != "cpu":
            torch.cuda.synchronize()
        seconds = (time.perf_counter() - tic) / runs
        print(f"{device} batch {size}: {size / seconds:,.0f} samples/s ({decode.where})")
        if size == batch:
            rates[device], rows[device] = size / seconds, out[0]
if "cuda" in rows:
    same = sum(a == b for a, b in zip(rows["cuda"], rows["cpu"]))
    print(f"greedy outputs equal on cuda and cpu: {same}/{batch} "
          f"({'yes' if same == batch else 'NO'})")
    print(f"sampling speed-up cuda / cpu 2 threads at batch {batch}: "
          f"{rates['cuda'] / rates['cpu']:.1f}x (goal >= 20x)")
    sys.exit(0 if same == batch else 1)
EOF
for device in $devices; do
  timeout 180 "$PY" -m compgen sample exported/scan-jump-recomb2 --backend torch \
    --strategy greedy --n 200 --batch-size 256 --device "$device" -o "$work/s-$device.tsv" \
    > "$work/s-$device.out" 2> "$work/s-$device.err" \
    || fail "compgen sample --device $device (tail: $(tail -8 "$work/s-$device.err"))"
  tail -2 "$work/s-$device.out"
done
if [ "$gpu" = 1 ]; then
  if cmp -s "$work/s-cuda.tsv" "$work/s-cpu.tsv"; then
    echo "samples files: identical"
  elif cmp -s <(cut -f1,2 "$work/s-cuda.tsv") <(cut -f1,2 "$work/s-cpu.tsv"); then
    echo "samples files: the same pairs, log-probabilities differ in the last digits"
  else
    fail "samples files differ: $(diff <(cut -f1,2 "$work/s-cuda.tsv") <(cut -f1,2 "$work/s-cpu.tsv") | head -4)"
  fi
fi

section "CUDA_VISIBLE_DEVICES= (no GPU visible)"
auto=$(CUDA_VISIBLE_DEVICES= timeout 120 "$PY" -m compgen env --json \
  | "$PY" -c "import json, sys; print(json.load(sys.stdin)['device']['auto'])")
[ "$auto" = cpu ] && echo "--device auto -> cpu" || fail "--device auto -> $auto"
CUDA_VISIBLE_DEVICES= timeout 120 "$PY" -m compgen sample exported/scan-jump-recomb2 --n 2 \
  --device cuda > "$work/hidden.out" 2> "$work/hidden.err"
rc=$?
if [ "$rc" = 2 ] && [ ! -s "$work/hidden.out" ] && [ "$(wc -l < "$work/hidden.err")" = 1 ]; then
  echo "--device cuda -> exit 2: $(cat "$work/hidden.err")"
else
  fail "--device cuda with no GPU visible: exit $rc, stderr $(head -3 "$work/hidden.err")"
fi

section "generator training on the CPU: recombine_scan (H 512), 2 threads"
# the CPU leg: 2 threads (the project's machine), at most CPU_SECONDS (the rate is what
# counts); its compiled loops are built first (once per checkout, ~1 min), outside the timing
if [ "${CPU_LEG:-1}" = 1 ]; then
  timeout 300 "$PY" -c "from compgen.models import native; native.loops()" \
    || fail "building the compiled training loops"
  train cpu-b32 cpu "$CPU_UPDATES" --threads 2 --time-budget "${CPU_SECONDS:-60}"
  if [ "$gpu" = 1 ]; then
    "$PY" - "$work/cuda-b32-bf16.log" "$work/cuda-b32-fp32.log" "$work/cuda-b512-bf16.log" \
      "$work/cpu-b32.log" <<'EOF'
import re, sys
rates = []
for path in sys.argv[1:]:
    found = re.findall(r"([0-9.]+) examples/s on", open(path).read())
    rates.append(float(found[-1]) if found else float("nan"))
for name, r in zip(("cuda bf16 batch 32", "cuda fp32 batch 32", "cuda bf16 batch 512"), rates):
    print(f"training speed-up {name} / cpu 2 threads batch 32: {r / rates[-1]:.1f}x "
          "(goal >= 20x)")
EOF
  fi
fi

section "result"
if [ "$failures" = 0 ]; then echo "all checks passed"; else echo "$failures check(s) failed"; fi
exit $((failures > 0))
