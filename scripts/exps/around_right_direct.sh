#!/usr/bin/env bash
# SCAN around_right, direct inference (Appendix E): the recomb-2 generator predicts, no predictor.
source "$(dirname "$0")/run.sh"
run_row around_right-direct "$@"
