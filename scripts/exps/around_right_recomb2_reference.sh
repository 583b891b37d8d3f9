#!/usr/bin/env bash
# SCAN around_right, recomb-2 as the reference's around_right_novae_2proto.sh runs it: its
# generator and predictor sizes, mixed sampler at T 0.2, no rare filter, rounds until 500
# are accepted, the 300 most probable kept (compgen.pipelines.runs.REFERENCE_RECIPE).
source "$(dirname "$0")/run.sh"
run_row around_right-recomb2-reference "$@"
