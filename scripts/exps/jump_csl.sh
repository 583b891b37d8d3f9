#!/usr/bin/env bash
# SCAN jump, CSL: induced QCFG, fitted model, 100,000 samples mixed in at p_aug 0.5, then the predictor.
source "$(dirname "$0")/run.sh"
run_row jump-csl "$@"
