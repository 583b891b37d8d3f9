#!/usr/bin/env bash
# SCAN around_right, recomb-2 + VAE (vMF latent; Table 1b).
source "$(dirname "$0")/run.sh"
run_row around_right-recomb2-vae "$@"
