#!/usr/bin/env bash
# SIGMORPHON swahili, learned aug. (basic): recomb-0 generator (no prototypes, no copying), mixed sampler;
# every hint count in $HINTS (default 4 8 16), seeds = few-shot splits.
source "$(dirname "$0")/run.sh"
for hints in ${HINTS:-4 8 16}; do
    run_row swahili-h"$hints"-basic "$@"
done
