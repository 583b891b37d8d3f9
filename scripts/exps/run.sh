#!/usr/bin/env bash
# Shared by every script in this folder: run one pipeline row for the seeds in $SEEDS
# (default 0-4, as the paper). Extra arguments go to `compgen pipeline`, e.g.
#   SEEDS=0,1 scripts/exps/jump_recomb2.sh --threads 1 --generator-epochs 5
# Results accumulate in runs/pipeline/results.md (see docs/results.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
export COMPGEN_DATA="${COMPGEN_DATA:-../shared/data}"
run_row() {
    local name="$1"; shift
    .venv/bin/python -m compgen pipeline "$name" --seeds "${SEEDS:-0-4}" "$@"
}
