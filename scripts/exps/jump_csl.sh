#!/usr/bin/env bash
# SCAN jump, CSL: a QCFG induced from the training pairs, its latent-state model fitted,
# 100,000 pairs sampled (compgen augment csl), then the predictor (project seq2seq, p_aug 0.5).
source "$(dirname "$0")/run.sh"
run_row jump-csl "$@"
