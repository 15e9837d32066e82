#!/usr/bin/env bash
# The Kodak CPU protocol of benchmarks/image/: 4 Kodak images x4-downsampled (192x128), 3x64 networks, 5000
# iterations; the robustness sweep on kodim05 (2000 iterations); kodim05 at 20k iterations.
#
# Every job runs on its own through /work/cpu_slot.sh (one core, waits for a free one) when that script exists;
# WORKERS loops (default 1: the cores are shared) share the job queue (a job is claimed with mkdir). Rerunning
# resumes: finished jobs are skipped (stop a running grid before restarting it). Cheap jobs first, then the
# filtered networks on 256-channel embeddings (about 0.4 s per iteration on 1 core).
#
# usage: scripts/bench_image_cpu.sh [OUT]        (default OUT: outputs/bench-image-cpu)
#        WORKERS=2 KODAK=../shared/data/kodak scripts/bench_image_cpu.sh
# Summary only (any time, while it runs too): SUMMARIZE=1 scripts/bench_image_cpu.sh [OUT], then copy into
# benchmarks/image/ with scripts/bench_image_collect.sh [OUT].
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-outputs/bench-image-cpu}
KODAK=${KODAK:-../shared/data/kodak}
WORKERS=${WORKERS:-1}
RFF_IMAGE=${RFF_IMAGE:-.venv/bin/rff-image}
SLOT=/work/cpu_slot.sh
[ -x "$SLOT" ] || SLOT=env
VARIANTS=(mlp-pe mlp-pe-eqparams filtered-pe filtered-pe-nols filtered-pe-bias siren gauss mlp-rff mlp-pe-wide wire
          filtered-rff filtered-rff-nols mlp-rff-eqparams filtered-pe-wide sape sape-pe)
ARGS=(--images "$KODAK" --names kodim01 kodim05 kodim13 kodim15 --out "$OUT" --iters 5000 --hidden-features 64
      --downsample 4 --variants "${VARIANTS[@]}" --sweep-names kodim05 --sweep-iters 2000 --long-names kodim05
      --long-iters 20000 --crops-image kodim05
      --long-variants mlp-pe filtered-pe filtered-pe-nols siren gauss mlp-rff mlp-pe-wide wire filtered-pe-wide
      filtered-rff)

if [ -n "${SUMMARIZE:-}" ]; then  # only rebuild results.json, results.md and the figures
  exec "$RFF_IMAGE" bench "${ARGS[@]}" --summarize-only
fi

mkdir -p "$OUT/logs"
rm -rf "$OUT/.claims" && mkdir -p "$OUT/.claims"

# index <tab> status <tab> iters <tab> cost <tab> folder. Order: kodim05's whole table first (cheap runs, then the
# filtered networks and their baselines), then the cheap runs of the other images, their filtered networks and
# equal-parameter baselines, the sweep, the remaining runs, and the long runs last.
order() {
  "$RFF_IMAGE" bench "${ARGS[@]}" --list-jobs | awk -F'\t' '$2 == "pending"' | awk -F'\t' 'BEGIN { OFS = "\t" }
    {
      p = 10
      if ($5 ~ /^runs\/kodim05\// && $4 < 4e3) p = 0
      else if ($5 ~ /^runs\/kodim05\/filtered-rff$/) p = 1
      else if ($5 ~ /^runs\/kodim05\/(mlp-rff-eqparams|filtered-pe-wide)$/) p = 2
      else if ($5 ~ /^runs\/kodim05\//) p = 3
      else if ($5 ~ /^runs\// && $4 < 1e4) p = 4
      else if ($5 ~ /^runs\/.*\/filtered-rff$/) p = 5
      else if ($5 ~ /^runs\/.*\/mlp-rff-eqparams$/) p = 6
      else if ($5 ~ /^runs\/.*\/filtered-pe-wide$/) p = 7
      else if ($5 ~ /^sweep\//) p = 8
      else if ($5 ~ /^runs\//) p = 9
      print p, $4, $1, $5
    }' | sort -s -t$'\t' -k1,1n -k2,2g | cut -f3
}

worker() {
  local id=$1
  for job in $(order); do
    mkdir "$OUT/.claims/$job" 2>/dev/null || continue
    echo "[worker $id] $(date -u +%FT%TZ) job $job"
    "$SLOT" "$RFF_IMAGE" bench "${ARGS[@]}" --job "$job" --no-progress >>"$OUT/logs/job-$job.log" 2>&1 \
      || echo "[worker $id] job $job failed (see $OUT/logs/job-$job.log)"
  done
}

for id in $(seq 1 "$WORKERS"); do
  worker "$id" &
  sleep 2
done
wait
"$RFF_IMAGE" bench "${ARGS[@]}" --summarize-only
echo "done: $OUT/results.md"
