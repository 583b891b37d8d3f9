#!/usr/bin/env bash
# SCAN jump, direct inference (Appendix E): the recomb-2 generator predicts, no predictor.
source "$(dirname "$0")/run.sh"
run_row jump-direct "$@"
