#!/usr/bin/env bash
# The CPU protocol of benchmarks/nerf/: rff-nerf-lite on the NeRF synthetic chair at 1/8 resolution (100x100),
# filter on and off (the MLP+PE baseline), same steps and seed; two more baselines: as many parameters as the
# filtered model (density MLP width 140) and 25% more steps (about the filtered model's training time). Then the
# per-step cost, measured with the variants alternating in one process, for rff-nerf-lite and the paper-size
# rff-nerf. Each training is a resumable job (rerun to go on). Pin it to a core yourself if the machine is shared
# (e.g. `taskset -c 1 scripts/bench_nerf_cpu.sh`).
#
# usage: scripts/bench_nerf_cpu.sh [OUT]     (default OUT: outputs/bench-nerf-cpu)
#        STEPS=2000 CHAIR=../shared/data/nerf_synthetic/chair scripts/bench_nerf_cpu.sh
# then:  .venv/bin/rff-bench nerf-report --overwrite --out OUT --dest benchmarks/nerf --title "..." --how "..."
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-outputs/bench-nerf-cpu}
STEPS=${STEPS:-2000}
CHAIR=${CHAIR:-../shared/data/nerf_synthetic/chair}
BENCH=${BENCH:-.venv/bin/rff-bench}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
COMMON=(--data "$CHAIR" --out "$OUT" --scale 0.125 --seed 42 --device cpu)
mkdir -p "$OUT/logs"
"$BENCH" nerf "${COMMON[@]}" --steps "$STEPS" --variants \
    "baseline:rff-nerf-lite,use_filter=false" \
    "filter:rff-nerf-lite" \
    "baseline-w140:rff-nerf-lite,use_filter=false,base_mlp_layer_width=140" \
    "baseline-long:rff-nerf-lite,use_filter=false,max_num_iterations=$((STEPS * 5 / 4))" > "$OUT/logs/train.log" 2>&1
"$BENCH" nerf-timing --overwrite "${COMMON[@]}" --rounds 20 --variants "baseline:rff-nerf-lite,use_filter=false" \
    "filter:rff-nerf-lite" > "$OUT/logs/timing.log" 2>&1
# the paper-size rff-nerf (8x256 fields, 64+128 samples, 1024 rays): about 20 s per step on one core, so few steps
"$BENCH" nerf-timing --overwrite "${COMMON[@]}" --rounds 4 --block 3 --warmup 2 --variants \
    "baseline:rff-nerf,use_filter=false" "filter:rff-nerf" > "$OUT/logs/timing-rff-nerf.log" 2>&1
echo "done: $OUT (write the report with: $BENCH nerf-report --overwrite --out $OUT --dest benchmarks/nerf)"
