#!/usr/bin/env bash
# The CPU protocol of benchmarks/nerf/: rff-nerf-lite on the NeRF synthetic chair at 1/8 resolution (100x100),
# filter on vs off (MLP+PE), same steps and seed; test-view PSNR/SSIM, seconds per step.
#
# The two trainings run at the same time, each on its own core through /work/cpu_slot.sh when that script exists
# (one thread each). Their own seconds per step are then only indicative; the per-step cost ratio is measured by
# the `timing` step, which alternates blocks of steps of both variants in one process (equal conditions).
#
# usage: scripts/bench_nerf_cpu.sh [OUT]     (default OUT: outputs/bench-nerf-cpu)
#        STEPS=2000 CHAIR=../shared/data/nerf_synthetic/chair scripts/bench_nerf_cpu.sh
# then:  .venv/bin/python scripts/bench_nerf.py report --out OUT --how "..."   (writes benchmarks/nerf/)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-outputs/bench-nerf-cpu}
STEPS=${STEPS:-2000}
CHAIR=${CHAIR:-../shared/data/nerf_synthetic/chair}
PY=${PY:-.venv/bin/python}
SLOT=${SLOT:-/work/cpu_slot.sh}
[ -x "$SLOT" ] || SLOT=env
mkdir -p "$OUT/logs"
for variant in baseline filter; do
  "$SLOT" "$PY" scripts/bench_nerf.py train --variant "$variant" --out "$OUT" --data "$CHAIR" --steps "$STEPS" \
    --scale 0.125 --seed 42 > "$OUT/logs/$variant.log" 2>&1 &
done
wait
"$SLOT" "$PY" scripts/bench_nerf.py timing --out "$OUT" --data "$CHAIR" --scale 0.125 > "$OUT/logs/timing.log" 2>&1
echo "done: $OUT (make the report with scripts/bench_nerf.py report --out $OUT)"
