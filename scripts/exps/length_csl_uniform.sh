#!/usr/bin/env bash
# SCAN length, CSL without its model: rules sampled uniformly (the paper's ablation).
source "$(dirname "$0")/run.sh"
run_row length-csl-uniform "$@"
