#!/usr/bin/env bash
# One GPU window of the paper-width study's full-size rows (benchmarks/reproduction/full_size.py): the queue for
# BUDGET seconds (give the call a limit about two minutes longer), the row in progress left as a checkpoint in
# benchmarks/reproduction/full_size/, and that folder and full_size.md copied to OUT. Back here, replace the folder's
# files by those that came back (a finished row's checkpoint is gone), put full_size.md beside it, and commit: the
# next window goes on from there. Runs from the repository without installing it. Prepare here, once:
# scripts/gpu_nerf_wheels.sh (carry .whl) and `mkdir -p data/kodak && cp DATA/kodak/kodim0[15].png data/kodak/`
# (carry data).
#
# usage: COMMIT=<hash> BUDGET=480 ITERS=20000 scripts/gpu_full_size.sh [OUT]      (DEVICE=cpu ITERS=2: a dry run)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-outputs/full-size}}
source scripts/gpu_env.sh
mkdir -p "$OUT"
(cd benchmarks/reproduction && "$PYTHON" full_size.py run --data ../../data --budget "${BUDGET:-480}" \
    --iters "${ITERS:-20000}" --device "${DEVICE:-cuda}" --commit "${COMMIT:-}") 2>&1 | tee "$OUT/log.txt"
cp benchmarks/reproduction/full_size/* benchmarks/reproduction/full_size.md "$OUT/"
