#!/usr/bin/env bash
# rff-nerf (nerf-pytorch's Blender setup: 8x256 coarse/fine, 64+128 samples, 1024 rays) vs its filter-off
# baseline on the NeRF synthetic chair at 200x200 (camera-res-scale-factor 0.25), as in the paper's setup but
# with far fewer steps. Needs only torch + nerfstudio + this package, and one CUDA GPU.
#
# The two trainings share the GPU at the same time (their own s/step are then indicative only); the per-step
# cost ratio comes from the interleaved `timing` step. Results land in OUT (default $OUT or outputs/bench-nerf-gpu);
# the report is then written with scripts/bench_nerf.py report --out OUT --dest benchmarks/nerf/gpu.
#
# usage: STEPS=2000 CHAIR=../shared/data/nerf_synthetic/chair scripts/bench_nerf_gpu.sh [OUT]
#        (DEVICE=cpu ROUNDS=1 BLOCK=1 STEPS=2 for a dry run of the script without a GPU)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-outputs/bench-nerf-gpu}}
STEPS=${STEPS:-2000}
DEVICE=${DEVICE:-cuda}
ROUNDS=${ROUNDS:-10}
BLOCK=${BLOCK:-20}
CHAIR=${CHAIR:-../shared/data/nerf_synthetic/chair}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT/logs"
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/logs/gpu.txt" 2>&1 || true
for variant in baseline filter; do
  "$PY" scripts/bench_nerf.py train --variant "$variant" --method rff-nerf --device "$DEVICE" --out "$OUT" \
    --data "$CHAIR" --steps "$STEPS" --scale 0.25 --seed 42 > "$OUT/logs/$variant.log" 2>&1 &
done
wait
"$PY" scripts/bench_nerf.py timing --method rff-nerf --device "$DEVICE" --out "$OUT" --data "$CHAIR" --scale 0.25 \
  --rounds "$ROUNDS" --block "$BLOCK" > "$OUT/logs/timing.log" 2>&1
"$PY" scripts/bench_nerf.py report --out "$OUT" --dest "$OUT/report" \
  --title "rff-nerf on the NeRF synthetic chair at 200x200, $DEVICE, $STEPS steps" --views r_0 r_64 r_128 \
  > "$OUT/logs/report.log" 2>&1
tail -n 30 "$OUT/report/results.md"
