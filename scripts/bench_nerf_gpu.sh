#!/usr/bin/env bash
# rff-nerf (nerf-pytorch's Blender setup: 8x256 coarse/fine, 64+128 samples, 1024 rays) against its filter-off
# baseline on the NeRF synthetic chair at 200x200 (camera-res-scale-factor 0.25), as in the paper's setup but with
# far fewer steps: one rff-nerf-bench, the two trained one after another and evaluated on all test views, then
# OUT/results.md and OUT/results.json; a rerun skips the finished variant. (The per-step cost alternating in one
# process was `rff-bench nerf-timing`, retired in the redesign; each row's s/step is its own run's.) Needs torch,
# nerfstudio 1.1.5 and one CUDA GPU; runs from the repository without installing it (PYTHONPATH). On a machine
# without nerfstudio: scripts/gpu_nerf_wheels.sh here, carry .whl/nerf, there
# `python -m pip install --no-index --no-deps --target .whl/site .whl/nerf/*.whl` and PYTHONPATH=$PWD/.whl/site.
#
# usage: STEPS=2000 CHAIR=../shared/data/nerf_synthetic/chair scripts/bench_nerf_gpu.sh [OUT]
#        (DEVICE=cpu STEPS=2 CHAIR=<a scene from rff-scene blender> SCALE=1 for a dry run without a GPU)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-outputs/bench-nerf-gpu}}
STEPS=${STEPS:-2000}
DEVICE=${DEVICE:-cuda}
CHAIR=${CHAIR:-../shared/data/nerf_synthetic/chair}
SCALE=${SCALE:-0.25}
PYTHON=${PYTHON:-python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p "$OUT/logs"
nvidia-smi --query-gpu=name,memory.total --format=csv > "$OUT/logs/gpu.txt" 2>&1 || true
"$PYTHON" -m rff_field.cli.nerf_bench --data "$CHAIR" --out "$OUT" --scale "$SCALE" --seed 42 --device "$DEVICE" \
    --steps "$STEPS" --variants "baseline:rff-nerf,embedding.filtered=false" "filter:rff-nerf" \
    > "$OUT/logs/train.log" 2>&1
cat "$OUT/results.md"
