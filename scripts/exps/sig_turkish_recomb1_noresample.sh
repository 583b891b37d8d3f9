#!/usr/bin/env bash
# SIGMORPHON turkish, recomb-1 without resampling (the paper's appendix tables);
# every hint count in $HINTS (default 4 8 16), seeds = few-shot splits.
source "$(dirname "$0")/run.sh"
for hints in ${HINTS:-4 8 16}; do
    run_row turkish-h"$hints"-recomb1-noresample "$@"
done
