#!/usr/bin/env bash
# SCAN around_right, CSL with uniform sampling (no model, the paper's ablation), then the predictor.
source "$(dirname "$0")/run.sh"
run_row around_right-csl-uniform "$@"
