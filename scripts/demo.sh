#!/usr/bin/env bash
# The demo: GECA and a small R&R pipeline (generator -> ONNX export -> samples ->
# predictor -> exact match) on SCAN jump, from the copy embedded in the package.
# Rerunning it reuses what is already there (the generator is trained once).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
enable -n compgen  # bash has a builtin of the same name (completion); use the program instead
out=runs/demo
mkdir -p "$out"
start=$(date +%s)

echo "== 1. data: the SCAN jump split (embedded)"
compgen data stats scan/jump

echo "== 2. GECA, the reference preset (hold-out, dedup, 1000 samples)"
compgen augment geca scan/jump --preset scan -o "$out/geca.tsv"

echo "== 3. a small recomb-2 generator with copying (4 CPU-minutes; the full run is 15)"
if [ ! -f "$out/recomb2.pt" ]; then
  compgen train generator --config recombine_scan_cpu --data scan/jump --time-budget 240 \
    --quiet -o "$out/recomb2.pt"
fi

echo "== 4. export to TorchScript + ONNX, checked against the eager model"
if [ ! -f exported/demo-recomb2/manifest.json ]; then
  compgen export "$out/recomb2.pt" -o exported/demo-recomb2
fi

echo "== 5. sample through the exported ONNX graphs (beam search, rare-token resampling)"
compgen sample exported/demo-recomb2 --backend onnx --n 200 --strategy beam --resample rare \
  -o "$out/samples.tsv"

echo "== 6. the conditional predictor on original + synthesized data (1 epoch)"
if [ ! -f "$out/predictor.pt" ]; then
  compgen train predictor --data scan/jump --config seq2seq_scan_cpu --augment "$out/samples.tsv" \
    --p-aug 0.01 --epochs 1 -o "$out/predictor.pt"
fi
compgen evaluate "$out/predictor.pt" --data scan/jump -o "$out/results.csv" --plots "$out/plots"

echo "== done in $(( $(date +%s) - start )) s; outputs in $out/ and exported/demo-recomb2/"
