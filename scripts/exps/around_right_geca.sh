#!/usr/bin/env bash
# SCAN around_right, GECA: rule-based recombination (compgen augment geca), then the predictor.
source "$(dirname "$0")/run.sh"
run_row around_right-geca "$@"
