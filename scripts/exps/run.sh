#!/usr/bin/env bash
# Shared by every script in this folder: run one pipeline row for the seeds in $SEEDS
# (default 0-4, as the paper). Extra arguments go to `compgen pipeline`, e.g.
#   SEEDS=0,1 scripts/exps/jump_recomb2.sh --threads 1 --generator-epochs 5
# Runs from any folder: results accumulate in ./runs/pipeline/ of the current folder
# (results.md; see docs/results.md), data come from the data folder ($COMPGEN_DATA, else
# ~/.cache/compgen/data). $PYTHON overrides the clone's .venv/bin/python.
set -euo pipefail
COMPGEN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PYTHON="${PYTHON:-$COMPGEN_ROOT/.venv/bin/python}"
if [ -z "${COMPGEN_DATA:-}" ] && [ -d "$COMPGEN_ROOT/../shared/data" ]; then
    export COMPGEN_DATA="$COMPGEN_ROOT/../shared/data"   # the data folder beside a development checkout
fi
run_row() {
    local name="$1"; shift
    "$PYTHON" -m compgen pipeline "$name" --seeds "${SEEDS:-0-4}" "$@"
}
