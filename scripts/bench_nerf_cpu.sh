#!/usr/bin/env bash
# The CPU protocol of benchmarks/nerf/results.md: rff-nerf-lite on the NeRF synthetic chair at 1/8 resolution
# (100x100), filter on and off (the MLP+PE baseline), same steps and seed; two more baselines: as many parameters as
# the filtered model (density MLP width 140) and 25% more steps (about the filtered model's training time). One
# rff-nerf-bench trains the four one after another, evaluates each on all 25 test views and writes OUT/results.md
# and OUT/results.json; a rerun skips the finished ones. The per-step cost with the variants alternating in one
# process (results.md's ratios) was `rff-bench nerf-timing`, retired in the redesign: `git checkout 3475eec` reruns
# it. Pin it to a core if the machine is shared (e.g. `taskset -c 1 scripts/bench_nerf_cpu.sh`).
#
# usage: scripts/bench_nerf_cpu.sh [OUT]     (default OUT: outputs/bench-nerf-cpu)
#        STEPS=2000 CHAIR=../shared/data/nerf_synthetic/chair scripts/bench_nerf_cpu.sh
#        (STEPS=2 CHAIR=<a scene from rff-scene blender> SCALE=1 for a dry run)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-outputs/bench-nerf-cpu}
STEPS=${STEPS:-2000}
CHAIR=${CHAIR:-../shared/data/nerf_synthetic/chair}
SCALE=${SCALE:-0.125}
PYTHON=${PYTHON:-.venv/bin/python}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
mkdir -p "$OUT/logs"
"$PYTHON" -m rff_field.cli.nerf_bench --data "$CHAIR" --out "$OUT" --scale "$SCALE" --seed 42 --device cpu \
    --steps "$STEPS" --variants \
    "baseline:rff-nerf-lite,embedding.filtered=false" \
    "filter:rff-nerf-lite" \
    "baseline-w140:rff-nerf-lite,embedding.filtered=false,base_mlp_layer_width=140" \
    "baseline-long:rff-nerf-lite,embedding.filtered=false,max_num_iterations=$((STEPS * 5 / 4))" \
    > "$OUT/logs/train.log" 2>&1
cat "$OUT/results.md"
