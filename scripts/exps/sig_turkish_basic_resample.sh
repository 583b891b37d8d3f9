#!/usr/bin/env bash
# SIGMORPHON turkish, learned aug. (basic) + resampling (samples must contain the rare word / tag);
# every hint count in $HINTS (default 4 8 16), seeds = few-shot splits.
source "$(dirname "$0")/run.sh"
for hints in ${HINTS:-4 8 16}; do
    run_row turkish-h"$hints"-basic-resample "$@"
done
