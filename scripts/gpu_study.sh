#!/usr/bin/env bash
# The GPU runs behind benchmarks/image/ and benchmarks/reproduction/: the Kodak x4 protocol grid of rff-image
# bench (issue 5) and the reproduction study's variants (scripts/study_variants.sh), run side by side on one GPU
# within a time budget, each part resumable (rerun the same command to finish what a budget cut off).
#
# usage: scripts/gpu_study.sh OUT_DIR [BUDGET_SECONDS]
#   IMAGES=folder of kodim01/05/13/15 (default .device_data/kodak), PYTHON=python3,
#   W_GRID/W_FACT/W_RFF/W_LONG/W_PAPER = worker processes per part, PAPER_ITERS = iterations of the
#   full-resolution (paper protocol) runs.
set -u
OUT_DIR=${1:?usage: scripts/gpu_study.sh OUT_DIR [BUDGET_SECONDS]}
BUDGET=${2:-420}
IM=${IMAGES:-.device_data/kodak}
PY=${PYTHON:-python3}
cd "$(dirname "$0")/.."
source scripts/study_variants.sh
mkdir -p "$OUT_DIR"
common=(--protocol cpu --device ${DEVICE:-cuda} --no-lpips --images "$IM")
declare -A ARGS
ARGS[grid]="${common[*]} --workers ${W_GRID:-4} --variants mlp-pe mlp-pe-eqparams filtered-pe filtered-pe-nols
    filtered-pe-bias siren gauss mlp-rff mlp-pe-wide wire filtered-rff filtered-rff-nols mlp-rff-eqparams
    filtered-pe-wide sape sape-pe"
ARGS[factors]="${common[*]} --workers ${W_FACT:-5} --no-sweep --no-long --variants ${STUDY_FACTORS[*]}"
ARGS[rff]="${common[*]} --workers ${W_RFF:-3} --no-sweep --no-long --variants ${STUDY_RFF[*]}"
ARGS[long]="${common[*]} --workers ${W_LONG:-4} --no-sweep --no-long --iters 20000 --variants ${STUDY_LONG[*]}"
ARGS[paper]="--protocol paper --device ${DEVICE:-cuda} --no-lpips --images $IM --workers ${W_PAPER:-1} --names kodim05
    --iters ${PAPER_ITERS:-2000} --variants mlp-pe filtered-pe mlp-pe-wide filtered-pe-wide"
PARTS=${PARTS:-grid factors rff long paper}
for name in $PARTS; do  # variants hold no spaces, so word splitting of ARGS is safe
    # shellcheck disable=SC2086
    timeout --kill-after=5 "$BUDGET" "$PY" scripts/bench_image.py ${ARGS[$name]} --out "$OUT_DIR/$name" \
        >"$OUT_DIR/$name.log" 2>&1 &
done
wait
for name in $PARTS; do
    # shellcheck disable=SC2086
    timeout 120 "$PY" scripts/bench_image.py ${ARGS[$name]} --summarize-only --out "$OUT_DIR/$name" \
        >>"$OUT_DIR/$name.log" 2>&1 &
done
wait
for name in $PARTS; do
    echo "$name: $(find "$OUT_DIR/$name" -name metrics.json | wc -l) runs finished"
done
