#!/usr/bin/env bash
# One call on a lent GPU machine that has torch but not nerfstudio: install the wheels of scripts/gpu_nerf_wheels.sh
# (carried in .whl/nerf) into .whl/site, check the imports, run scripts/gpu_nerf.sh on the chair at 200x200 (carried
# in data/chair, benchmarks/nerf/gpu.md) and pack the results into $OUT/gpu-nerf.tgz with the log in $OUT. The run
# is stopped LIMIT_S seconds after this script started, so that what it finished is packed before the call's own
# limit; the same command again (same RUN, on the same warm machine) goes on from the finished variants. Exits with
# the run's status, or 75 when it was stopped at LIMIT_S (124 would read as the call's own time-out).
#
# usage: OUT=<folder> scripts/gpu_nerf_call.sh [BUDGET_S]     (BUDGET_S: training seconds per variant, default 150)
#   PYTHON   the interpreter (default python3)      OPTIONS, CONTROLS, SAMPLES  as in scripts/gpu_nerf.sh
#   RUN      the run's folder (default outputs/gpu-nerf; another one for other OPTIONS, CONTROLS or SAMPLES on the
#            same machine)                          LIMIT_S  seconds before the run is stopped (default 480)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:?set OUT to the folder whose files come back}
PYTHON=${PYTHON:-python3}
RUN=${RUN:-outputs/gpu-nerf}
LIMIT_S=${LIMIT_S:-480}
export PYTHONUNBUFFERED=1
{
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target .whl/site .whl/nerf/*.whl &&
        export PYTHONPATH=$PWD/.whl/site &&
        "$PYTHON" -c "import nerfstudio.engine.trainer, rff_field.bench.nerf; print('imports ok')" &&
        left=$((LIMIT_S > SECONDS ? LIMIT_S - SECONDS : 1)) &&
        PYTHON=$PYTHON CHAIR=data/chair SCALE=1 timeout --signal=INT --kill-after=20 "$left" bash \
            scripts/gpu_nerf.sh "$RUN" "${1:-150}"
    rc=$?
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "stopped at LIMIT_S=$LIMIT_S s; the same command goes on from the finished variants"
        rc=75
    fi
    echo "rc=$rc"
} > "$OUT/gpu-nerf.log" 2>&1
[ -d "$RUN" ] && tar czf "$OUT/gpu-nerf.tgz" --exclude='*.ckpt' --exclude='.running' "$RUN"
tail -20 "$OUT/gpu-nerf.log"
exit "$rc"  # set inside the braces: they redirect, but run in this shell
