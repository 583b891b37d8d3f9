#!/usr/bin/env bash
# SCAN jump, learned aug. (basic): recomb-0 generator (no prototypes, no copying), mixed sampler.
source "$(dirname "$0")/run.sh"
run_row jump-basic "$@"
