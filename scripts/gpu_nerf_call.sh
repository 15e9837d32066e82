#!/usr/bin/env bash
# One call on a lent GPU machine that has torch but not nerfstudio: install the wheels of scripts/gpu_nerf_wheels.sh
# (carried in .whl/nerf) into .whl/site, check the imports, run scripts/gpu_nerf.sh on the chair at 200x200 (carried
# in data/chair, benchmarks/nerf/gpu.md) and pack the results into $OUT/gpu-nerf.tgz with the log in $OUT.
#
# usage: OUT=<folder> scripts/gpu_nerf_call.sh [BUDGET_S]     (BUDGET_S: training seconds per variant, default 150)
#   PYTHON   the interpreter (default python3)      OPTIONS  overrides for both variants (see scripts/gpu_nerf.sh)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to the folder whose files come back}
PYTHON=${PYTHON:-python3}
export PYTHONUNBUFFERED=1
{
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .whl/site .whl/nerf/*.whl &&
        export PYTHONPATH=$PWD/.whl/site &&
        "$PYTHON" -c "import nerfstudio.engine.trainer, rff_field.bench.nerf; print('imports ok')" &&
        PYTHON=$PYTHON CHAIR=data/chair SCALE=1 scripts/gpu_nerf.sh outputs/gpu-nerf "${1:-150}"
    echo "rc=$?"
} > "$OUT/gpu-nerf.log" 2>&1
tar czf "$OUT/gpu-nerf.tgz" --exclude='*.ckpt' outputs/gpu-nerf
tail -20 "$OUT/gpu-nerf.log"
