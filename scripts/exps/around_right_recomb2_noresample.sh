#!/usr/bin/env bash
# SCAN around_right, recomb-2 without resampling (the reference's *_novae_2proto.sh): the
# same recipe as around_right_recomb2_reference.sh, under the paper's no-resampling label.
source "$(dirname "$0")/run.sh"
run_row around_right-recomb2-noresample "$@"
