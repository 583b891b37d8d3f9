#!/usr/bin/env bash
# SIGMORPHON turkish, + recomb-1: one prototype, copying, resampling;
# every hint count in $HINTS (default 4 8 16), seeds = few-shot splits.
source "$(dirname "$0")/run.sh"
for hints in ${HINTS:-4 8 16}; do
    run_row turkish-h"$hints"-recomb1 "$@"
done
