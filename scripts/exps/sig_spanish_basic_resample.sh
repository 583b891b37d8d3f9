#!/usr/bin/env bash
# SIGMORPHON spanish, learned aug. (basic) + resampling (samples must contain the rare word / tag);
# every hint count in $HINTS (default 4 8 16), seeds = few-shot splits.
source "$(dirname "$0")/run.sh"
for hints in ${HINTS:-4 8 16}; do
    run_row spanish-h"$hints"-basic-resample "$@"
done
