#!/usr/bin/env bash
# SCAN jump, CSL without its model: rules sampled uniformly (the paper's ablation).
source "$(dirname "$0")/run.sh"
run_row jump-csl-uniform "$@"
