#!/bin/bash
# The CPU SDF benchmark recorded in benchmarks/sdf/ (see docs/sdf.md for what it measures and why it is reduced).
# One process per shape, each with one torch thread (pin them to cores yourself on a shared machine, e.g. with
# taskset); all methods of a shape run in the same process, so their seconds per step are comparable. The bunny also gets
# GAUSS and WIRE at scale 10 (their default 40 suits BACON's SDF scale badly), at extra cost.
# Usage: scripts/bench_sdf_cpu.sh [OUT]   (default outputs/sdf-bench-cpu; rerun to resume)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-outputs/sdf-bench-cpu}
MESHES=${MESHES:-../shared/data/meshes}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
COMMON=(
  --out "$OUT" --resume
  --iters 5000 --points-per-step 5000
  --hidden-features 128 --hidden-layers 3 --pe-frequencies 16 --rff-frequencies 48
  --resolution 256 --eval-samples 100000 --no-save-model
  --methods mlp-pe mlp-rff siren:hidden_layers=4 gauss wire bacon:hidden_layers=4 bacon:hidden_layers=8
            filtered-pe filtered-rff mlp-pe:hidden_features=157 filtered-pe:line_search=false
)
mkdir -p "$OUT/logs"
.venv/bin/rff-sdf bench --meshes "$MESHES/armadillo.obj" "${COMMON[@]}" --view 150 15 \
  > "$OUT/logs/armadillo.log" 2>&1 &
.venv/bin/rff-sdf bench --meshes "$MESHES/bunny-decimated-5k.obj" "${COMMON[@]}" gauss:gauss_scale=10 wire:wire_sigma0=10 > "$OUT/logs/bunny.log" 2>&1 &
wait
.venv/bin/rff-sdf bench --out "$OUT" --report-only --floor --figure-mesh armadillo --view 150 15
