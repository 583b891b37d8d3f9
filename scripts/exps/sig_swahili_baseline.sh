#!/usr/bin/env bash
# SIGMORPHON swahili, baseline: the predictor on the original data only;
# every hint count in $HINTS (default 4 8 16), seeds = few-shot splits.
source "$(dirname "$0")/run.sh"
for hints in ${HINTS:-4 8 16}; do
    run_row swahili-h"$hints"-baseline "$@"
done
