#!/bin/bash
# The CPU SDF benchmark recorded in benchmarks/sdf/ (see docs/sdf.md for what it measures and why it is reduced):
# BACON's protocol shortened to 5000 steps of 5000 points, ReLU MLPs of width 128 with 3 hidden layers after the
# first on a 96-channel PE (16 log-linear bands per axis) or 48 RFF, meshes on a 256^3 grid. Two processes share
# the grid (--shard), each with one torch thread (pin them to cores yourself on a shared machine, e.g. with taskset).
# The bunny also gets GAUSS and WIRE at scale 10 (their default 40 suits BACON's SDF scale badly), in a folder of
# its own. Rerunning the script skips finished jobs and resumes an unfinished one.
# Usage: scripts/bench_sdf_cpu.sh [OUT]   (default outputs/sdf-bench-cpu)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-outputs/sdf-bench-cpu}
MESHES=${MESHES:-../shared/data/meshes}
SDF=${SDF:-.venv/bin/rff-sdf}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
PROTOCOL=(
  --iters 5000 --points-per-step 5000 --hidden-features 128 --hidden-layers 3
  --embedding.num-frequencies 16 --resolution 256 --no-progress
)
VARIANTS=(
  mlp-pe mlp-rff:mlp-rff,embedding.num_frequencies=48 siren4:siren,hidden_layers=4 gauss wire
  bacon4:bacon,hidden_layers=4 bacon8:bacon,hidden_layers=8 filtered-pe
  filtered-rff:filtered-rff,embedding.num_frequencies=48 wide:mlp-pe,hidden_features=157
  fixed:filtered-pe,line_search.enabled=false
)
mkdir -p "$OUT/logs"
for shard in 1 2; do
  "$SDF" bench --meshes "$MESHES/armadillo.obj" "$MESHES/bunny-decimated-5k.obj" --out "$OUT" "${PROTOCOL[@]}" \
    --variants "${VARIANTS[@]}" --shard "$shard/2" > "$OUT/logs/shard$shard.log" 2>&1 &
done
wait
"$SDF" bench --meshes "$MESHES/bunny-decimated-5k.obj" --out "$OUT/bunny-scale10" "${PROTOCOL[@]}" \
  --variants gauss10:gauss,gauss_scale=10 wire10:wire,wire_sigma0=10 > "$OUT/logs/bunny-scale10.log" 2>&1
