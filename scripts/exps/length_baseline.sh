#!/usr/bin/env bash
# SCAN length, baseline: the predictor on the original data only.
source "$(dirname "$0")/run.sh"
run_row length-baseline "$@"
