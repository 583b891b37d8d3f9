#!/usr/bin/env bash
# SCAN jump, + recomb-1: one prototype, copying, resampling.
source "$(dirname "$0")/run.sh"
run_row jump-recomb1 "$@"
