#!/usr/bin/env bash
# SCAN around_right, learned aug. (basic): recomb-0 generator (no prototypes, no copying), mixed sampler.
source "$(dirname "$0")/run.sh"
run_row around_right-basic "$@"
