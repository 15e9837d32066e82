#!/usr/bin/env bash
# The CPU protocol of benchmarks/nerf/: rff-nerf-lite on the NeRF synthetic chair at 1/8 resolution (100x100),
# filter on vs off (MLP+PE), same steps and seed; test-view PSNR/SSIM, seconds per step. Two more baselines:
# as many parameters as the filtered model (density MLP width 140), and 2500 steps (about the filtered model's
# training time at its measured per-step cost).
#
# Trainings run two at a time, each on its own core through $SLOT (default /work/cpu_slot.sh when it exists; one
# thread each). Their own seconds per step are then only indicative; the per-step cost ratio is measured by the
# `timing` step, which alternates blocks of steps of both variants in one process (equal conditions); it runs for
# rff-nerf-lite and, shorter, for the paper-size rff-nerf.
#
# usage: scripts/bench_nerf_cpu.sh [OUT]     (default OUT: outputs/bench-nerf-cpu)
#        STEPS=2000 CHAIR=../shared/data/nerf_synthetic/chair EXTRAS=0 scripts/bench_nerf_cpu.sh
# then:  .venv/bin/python scripts/bench_nerf.py report --out OUT --how "..."   (writes benchmarks/nerf/)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-outputs/bench-nerf-cpu}
STEPS=${STEPS:-2000}
EXTRAS=${EXTRAS:-1}
CHAIR=${CHAIR:-../shared/data/nerf_synthetic/chair}
PY=${PY:-.venv/bin/python}
SLOT=${SLOT:-/work/cpu_slot.sh}
[ -x "$SLOT" ] || SLOT=env
COMMON=(--out "$OUT" --data "$CHAIR" --scale 0.125 --seed 42)
mkdir -p "$OUT/logs"
train() {  # name, then options of `bench_nerf.py train`
  local name=$1; shift
  "$SLOT" "$PY" scripts/bench_nerf.py train "${COMMON[@]}" --name "$name" "$@" > "$OUT/logs/$name.log" 2>&1
}
train baseline --variant baseline --steps "$STEPS" &
train filter --variant filter --steps "$STEPS" &
wait
if [ "$EXTRAS" = 1 ]; then
  train baseline-w140 --variant baseline --steps "$STEPS" --width 140 \
    --label "MLP+PE, width 140 (as many parameters as the filtered model)" &
  train baseline-long --variant baseline --steps $((STEPS * 5 / 4)) \
    --label "MLP+PE, $((STEPS * 5 / 4)) steps (about the filtered model's training time)" &
  wait
fi
"$SLOT" "$PY" scripts/bench_nerf.py timing --rounds 20 --out "$OUT" --data "$CHAIR" --scale 0.125 > "$OUT/logs/timing.log" 2>&1
# the paper-size rff-nerf (8x256 fields, 64+128 samples, 1024 rays): about 20 s per step on one core, so few steps
"$SLOT" "$PY" scripts/bench_nerf.py timing --method rff-nerf --rounds 4 --block 3 --warmup 2 --out "$OUT" \
  --data "$CHAIR" --scale 0.125 > "$OUT/logs/timing-rff-nerf.log" 2>&1
echo "done: $OUT (make the report with scripts/bench_nerf.py report --out $OUT)"
