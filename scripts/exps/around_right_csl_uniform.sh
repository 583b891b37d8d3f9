#!/usr/bin/env bash
# SCAN around_right, CSL without its model: rules sampled uniformly (the paper's ablation).
source "$(dirname "$0")/run.sh"
run_row around_right-csl-uniform "$@"
