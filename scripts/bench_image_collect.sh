#!/usr/bin/env bash
# Copy a benchmark's summaries (results.json, results.md, figures) into benchmarks/image/[SUBDIR]. Raw per-run
# folders stay where they are (they are not committed). Rebuild the summaries first if jobs finished since:
#   CPU:  scripts/bench_image_cpu.sh's command with --summarize-only, i.e. SUMMARIZE=1 scripts/bench_image_cpu.sh
#   GPU:  python scripts/bench_image.py <same options> --summarize-only
# usage: scripts/bench_image_collect.sh [OUT] [SUBDIR]    (default OUT: outputs/bench-image-cpu, SUBDIR: none)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-outputs/bench-image-cpu}
DEST=benchmarks/image${2:+/$2}
[ -f "$OUT/results.json" ] || { echo "no $OUT/results.json: run the benchmark (or --summarize-only) first" >&2; exit 1; }
mkdir -p "$DEST"
cp "$OUT/results.json" "$OUT/results.md" "$DEST/"
for png in "$OUT"/*.png; do [ -e "$png" ] && cp "$png" "$DEST/"; done
echo "copied $(ls "$DEST" | wc -l) files into $DEST"
