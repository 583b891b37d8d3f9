#!/usr/bin/env bash
# SCAN around_right, recomb-2 without copying (Table 1b).
source "$(dirname "$0")/run.sh"
run_row around_right-recomb2-nocopy "$@"
