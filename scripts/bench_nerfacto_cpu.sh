#!/usr/bin/env bash
# The CPU protocol of benchmarks/nerf/nerfacto.md: the NeRF synthetic chair at 1/8 resolution (100x100), every method
# trained for the same time (SECONDS_EACH, default 1200, of CPU time: other jobs on a shared core stretch wall time,
# not CPU time; CLOCK=wall for wall time) on one pinned core, one after the other: rff-nerfacto-lite
# with the filter on (its default residual form, and the paper's) and off, its filter-off baseline with as many
# parameters (density MLP width 96), rff-nerf-lite,
# nerfstudio's nerfacto with the lite's rays and samples per ray (its hash grids as they are), and nerfstudio's own
# nerfacto and vanilla-nerf as they are configured. The nerfacto-type methods render on a white background as rff-nerf
# does (the scene's own) and keep the scene's exact camera poses (nerfacto's camera optimiser off; rff-nerf has none:
# on, it cost 2.2 dB at 300 s). The last two render at 100-250 rays/s on one core, so they are evaluated on 5 of the 25
# test views (EVAL_VIEWS_SLOW). Then the test renderings' speed with the trained models taking turns in one process,
# the filter's per-step cost alternating in one process, and the report.
#
# usage: taskset -c 0 scripts/bench_nerfacto_cpu.sh [OUT]      (default OUT: outputs/bench-nerfacto-cpu)
#        SECONDS_EACH=1200 CHAIR=../shared/data/nerf_synthetic/chair taskset -c 0 scripts/bench_nerfacto_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-outputs/bench-nerfacto-cpu}
SECONDS_EACH=${SECONDS_EACH:-1200}
CHAIR=${CHAIR:-../shared/data/nerf_synthetic/chair}
SCALE=${SCALE:-0.125}
EVAL_VIEWS_SLOW=${EVAL_VIEWS_SLOW:-5}
BENCH=${BENCH:-.venv/bin/rff-bench}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
CLOCK=${CLOCK:-cpu}
COMMON=(--data "$CHAIR" --out "$OUT" --scale "$SCALE" --seed 42 --device cpu)
BLENDER=background_color=white,camera_optimizer.mode=off
LITE="rff-nerfacto-lite,$BLENDER"
mkdir -p "$OUT/logs"
SMALL=train_num_rays_per_batch=512,num_proposal_samples_per_ray="32 16",num_nerf_samples_per_ray=16
"$BENCH" nerf "${COMMON[@]}" --steps 1000000 --seconds "$SECONDS_EACH" --clock "$CLOCK" --variants \
    "filter:$LITE" "filter-paper:$LITE,filter_residual=false" "baseline:$LITE,use_filter=false" \
    "baseline-w96:$LITE,use_filter=false,hidden_dim=96" \
    "rff-nerf-lite:rff-nerf-lite" "nerfacto-small:nerfacto,$BLENDER,$SMALL" > "$OUT/logs/train.log" 2>&1
"$BENCH" nerf "${COMMON[@]}" --steps 1000000 --seconds "$SECONDS_EACH" --clock "$CLOCK" --eval-views "$EVAL_VIEWS_SLOW" \
    --variants "nerfacto:nerfacto,$BLENDER" "vanilla-nerf:vanilla-nerf" > "$OUT/logs/train-slow.log" 2>&1
"$BENCH" nerf-eval-timing --overwrite --out "$OUT" --labels filter baseline baseline-w96 rff-nerf-lite nerfacto-small \
    > "$OUT/logs/eval-timing.log" 2>&1
"$BENCH" nerf-timing --overwrite "${COMMON[@]}" --rounds 10 --variants "filter:$LITE" "baseline:$LITE,use_filter=false" \
    > "$OUT/logs/timing.log" 2>&1
echo "done: $OUT (report: $BENCH nerf-report --overwrite --out $OUT --dest benchmarks/nerf --name nerfacto --views r_0 r_96 r_192 --title ... --how ...)"
