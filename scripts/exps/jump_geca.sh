#!/usr/bin/env bash
# SCAN jump, GECA: rule-based recombination (compgen augment geca), then the predictor.
source "$(dirname "$0")/run.sh"
run_row jump-geca "$@"
