#!/usr/bin/env bash
# SCAN jump, baseline: the predictor on the original data only.
source "$(dirname "$0")/run.sh"
run_row jump-baseline "$@"
