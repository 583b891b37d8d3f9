#!/usr/bin/env bash
# SCAN around_right, + recomb-2: two prototypes, copying, resampling.
source "$(dirname "$0")/run.sh"
run_row around_right-recomb2 "$@"
