#!/usr/bin/env bash
# rff-nerf (nerf-pytorch's Blender setup: 8x256 coarse/fine, 64+128 samples, 1024 rays) against its filter-off
# baseline on the NeRF synthetic chair at 200x200 (camera-res-scale-factor 0.25), as in the paper's setup but with
# far fewer steps, then their per-step cost alternating in one process, and the report. Needs torch, nerfstudio,
# this package and one CUDA GPU.
#
# usage: STEPS=2000 CHAIR=../shared/data/nerf_synthetic/chair scripts/bench_nerf_gpu.sh [OUT]
#        (DEVICE=cpu ROUNDS=1 BLOCK=1 STEPS=2 for a dry run without a GPU)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-outputs/bench-nerf-gpu}}
STEPS=${STEPS:-2000}
DEVICE=${DEVICE:-cuda}
CHAIR=${CHAIR:-../shared/data/nerf_synthetic/chair}
BENCH=${BENCH:-.venv/bin/rff-bench}
COMMON=(--data "$CHAIR" --out "$OUT" --scale 0.25 --seed 42 --device "$DEVICE")
VARIANTS=("baseline:rff-nerf,use_filter=false" "filter:rff-nerf")
mkdir -p "$OUT/logs"
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/logs/gpu.txt" 2>&1 || true
"$BENCH" nerf "${COMMON[@]}" --steps "$STEPS" --variants "${VARIANTS[@]}" > "$OUT/logs/train.log" 2>&1
"$BENCH" nerf-timing --overwrite "${COMMON[@]}" --variants "${VARIANTS[@]}" --rounds "${ROUNDS:-10}" --block "${BLOCK:-20}" \
    > "$OUT/logs/timing.log" 2>&1
"$BENCH" nerf-report --overwrite --out "$OUT" --dest "$OUT/report" \
    --title "rff-nerf on the NeRF synthetic chair at 200x200, $DEVICE, $STEPS steps" > "$OUT/logs/report.log" 2>&1
tail -n 30 "$OUT/report/results.md"
