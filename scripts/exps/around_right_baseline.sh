#!/usr/bin/env bash
# SCAN around_right, baseline: the predictor on the original data only.
source "$(dirname "$0")/run.sh"
run_row around_right-baseline "$@"
