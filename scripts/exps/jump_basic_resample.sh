#!/usr/bin/env bash
# SCAN jump, learned aug. (basic) + resampling (samples must contain the rare word / tag).
source "$(dirname "$0")/run.sh"
run_row jump-basic-resample "$@"
