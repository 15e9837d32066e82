#!/usr/bin/env bash
# The GPU table of benchmarks/speed.md: filtered against plain per step, side by side on one GPU, at the paper's image
# protocol (kodim05 768x512, WIRE's PE, 3x256, batches of 65,536) and in rff-nerfacto (a scene of rff-scene blender,
# rendered there), into OUT (speed_gpu.json, speed.md); copy both into benchmarks/ and commit them. Runs from the
# repository without installing it. Prepare here, once: scripts/gpu_nerf_wheels.sh (carry .whl) and
# `mkdir -p data/kodak && cp DATA/kodak/kodim0[15].png data/kodak/` (carry data).
#
# usage: ROUNDS=9 scripts/gpu_speed.sh [OUT]      (DEVICE=cpu ROUNDS=1 for a dry run)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-outputs/speed-gpu}}
source scripts/gpu_env.sh
mkdir -p "$OUT"
cp benchmarks/speed.md "$OUT/"
SCENE=$(mktemp -d)/scene
"$PYTHON" -m rff_field.cli.scene blender --output-dir "$SCENE" > /dev/null
"$PYTHON" benchmarks/speed.py --device "${DEVICE:-cuda}" --settings image-paper nerfacto --scene "$SCENE" \
    --data data --rounds "${ROUNDS:-9}" --dest "$OUT" 2>&1 | tee "$OUT/speed_log.txt"
