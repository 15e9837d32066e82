#!/usr/bin/env bash
# The paper's Table 1 (Kodak 768x512, 3x256, best PSNR over 20k iterations, batches of 65,536 pixels) on a lent GPU,
# batched, resumable, within a time budget. Needs only python3 with torch, numpy, scikit-image, matplotlib,
# jaxtyping and rich. See benchmarks/gpu/README.md.
#
# usage: scripts/gpu_table1.sh OUT [BUDGET_S]
#   IMAGES     folder of images (default ../shared/data/kodak)
#   VARIANTS   rows to run (default "mlp-pe filtered-pe"; later calls: mlp-rff filtered-rff siren gauss wire
#              filtered-pe-fixed-lr)
#   NAMES      image names (default: every image of IMAGES)
#   ITERS      iterations (default: the protocol's 20000)
#   MODELS     most jobs fitted together (default 1: on an H200 one fit replayed as a CUDA graph beats batches)
#   PRECISION  fp32 (default), tf32 or bf16
#   DEVICE     auto (default), cuda or cpu
#   GRAPH      1 (default): replay each fit's step as a CUDA graph (batches of one only); empty: eager
#   FUSED      1 (default): compile the line search's arithmetic into fused kernels (--line-search.fused); empty: not
#   GRAPH_CHECK=N  first fit N iterations with and without the graph and compare (OUT/timing/graph_check.md)
#   TIMING=1   first measure seconds per iteration side by side (OUT/timing); TIMING_BATCHED=1: batched too
#   PYTHON     the interpreter (default python3)
set -euo pipefail
OUT=${1:?usage: scripts/gpu_table1.sh OUT [BUDGET_S]}
BUDGET_S=${2:-480}
GRAPH=${GRAPH-1}
FUSED=${FUSED-1}
cd "$(dirname "$0")/.."
# shellcheck disable=SC2086  # VARIANTS and NAMES are lists
PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" exec "${PYTHON:-python3}" -m rff_field.bench.table1 \
    --out "$OUT" --budget-s "$BUDGET_S" --images "${IMAGES:-../shared/data/kodak}" \
    --variants ${VARIANTS:-mlp-pe filtered-pe} --names ${NAMES:-} ${ITERS:+--iters "$ITERS"} \
    --batch-models "${MODELS:-1}" --precision "${PRECISION:-fp32}" --device "${DEVICE:-auto}" \
    ${GRAPH:+--cuda-graph} ${FUSED:+--fused-line-search} ${GRAPH_CHECK:+--graph-check "$GRAPH_CHECK"} \
    ${TIMING:+--timing} ${TIMING_BATCHED:+--timing-batched} ${TIMING_BLOCK:+--timing-block "$TIMING_BLOCK"} \
    ${TIMING_ROUNDS:+--timing-rounds "$TIMING_ROUNDS"}
