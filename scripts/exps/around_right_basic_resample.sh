#!/usr/bin/env bash
# SCAN around_right, learned aug. (basic) + resampling (samples must contain the rare word / tag).
source "$(dirname "$0")/run.sh"
run_row around_right-basic-resample "$@"
