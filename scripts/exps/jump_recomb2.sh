#!/usr/bin/env bash
# SCAN jump, + recomb-2: two prototypes, copying, resampling.
source "$(dirname "$0")/run.sh"
run_row jump-recomb2 "$@"
