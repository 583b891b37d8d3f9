#!/usr/bin/env bash
# SCAN around_right, CSL: induced QCFG, fitted model, 100,000 samples mixed in at p_aug 0.5, then the predictor.
source "$(dirname "$0")/run.sh"
run_row around_right-csl "$@"
