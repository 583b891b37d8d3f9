#!/usr/bin/env bash
# SCAN jump, recomb-2 without resampling (the reference's *_novae_2proto.sh).
source "$(dirname "$0")/run.sh"
run_row jump-recomb2-noresample "$@"
