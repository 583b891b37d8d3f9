#!/usr/bin/env bash
# SCAN jump, CSL with uniform sampling (no model, the paper's ablation), then the predictor.
source "$(dirname "$0")/run.sh"
run_row jump-csl-uniform "$@"
