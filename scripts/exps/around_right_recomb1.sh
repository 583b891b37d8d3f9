#!/usr/bin/env bash
# SCAN around_right, + recomb-1: one prototype, copying, resampling.
source "$(dirname "$0")/run.sh"
run_row around_right-recomb1 "$@"
