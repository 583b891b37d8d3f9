#!/usr/bin/env bash
# SCAN jump, recomb-2 + VAE (vMF latent; Table 1b).
source "$(dirname "$0")/run.sh"
run_row jump-recomb2-vae "$@"
