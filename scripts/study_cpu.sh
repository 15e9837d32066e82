#!/usr/bin/env bash
# The CPU runs that complete the GPU runs of scripts/gpu_study.sh (same protocol: Kodak x4, 3x64, seed 0), one
# job at a time on one core (through /work/cpu_slot.sh when it exists). Resumable: rerun to finish.
#
# usage: scripts/study_cpu.sh [PART ...]
#        PART in: grid long sweep learning64 factors64 sigma sigma2000 bound64 const64 depth64 init64 scale64 unbounded64
#        long64-filt long64-eqp deep64 long64-deep width80 pe128-k15 long80-filt long80-eqp
#        deep80 long80-deep
#        (default: grid sweep long learning64)
#   OUT=outputs/study-cpu  IMAGES=../shared/data/kodak
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-outputs/study-cpu}
IMAGES=${IMAGES:-../shared/data/kodak}
SLOT=$([ -x /work/cpu_slot.sh ] && echo /work/cpu_slot.sh || echo)
PY=.venv/bin/python
PE="filtered-pe,pe=loglinear"  # the paper's log-linear PE, scale 32; pe_frequencies per axis sets the width
PE64="$PE,pe_frequencies=16"
PLAIN64="mlp-pe,pe=loglinear,pe_frequencies=16"
REF64=(--reference-variants "filt-pe64:$PE64")  # what the equal-parameter MLPs match
DEEP64="eqp-deep-pe64:$PLAIN64,match_params=filt-pe64,match_by=depth"
PLAIN80="mlp-pe,pe=loglinear,pe_frequencies=20"
FILT80="filt-pe80:$PE,pe_frequencies=20"
REF80=(--reference-variants "$FILT80")
EQP80="eqp-pe80:$PLAIN80,match_params=filt-pe80"
DEEP80="eqp-deep-pe80:$PLAIN80,match_params=filt-pe80,match_by=depth"
bench() {  # bench PART ARGS...
    local part=$1; shift
    $SLOT "$PY" scripts/bench_image.py --protocol cpu --device cpu --workers 1 --no-sweep --no-long --no-lpips \
        --images "$IMAGES" --out "$OUT/$part" "$@"
}
for part in ${@:-grid sweep long learning64}; do
    case $part in
    grid)  # presets the GPU run did not reach
        bench grid --variants mlp-rff-eqparams sape sape-pe filtered-rff-nols ;;
    sweep)  # kodim05, 2000 iterations: RFF sigma (256 channels) and PE scale (64 channels), with and without filter
        args=()
        for s in 1 5 10 20 40; do args+=("plain-rff128-s$s:mlp-rff,rff_sigma=$s" "filt-rff128-s$s:filtered-rff,rff_sigma=$s"); done
        for s in 8 16 32 64 128; do
            args+=("plain-pe64-scale$s:mlp-pe,pe=loglinear,pe_frequencies=16,pe_scale=$s" "filt-pe64-scale$s:$PE64,pe_scale=$s")
        done
        bench sweep --names kodim05 --iters 2000 --variants "${args[@]}" ;;
    long)  # the paper's 20k iterations on kodim05
        bench long --names kodim05 --iters 20000 --variants mlp-pe filtered-pe mlp-rff \
            "plain-pe64:mlp-pe,pe=loglinear,pe_frequencies=16" "filt-pe64:$PE64" \
            "eqp-pe64:mlp-pe,pe=loglinear,pe_frequencies=16,match_params=filt-pe64" ;;
    learning64)  # how the filter learns, at 64 channels
        bench learning64 --names kodim05 kodim01 --variants "pe64-balance:$PE64,rule=balance" \
            "pe64-const1e-4:$PE64,line_search=false,filter_lr=1e-4" \
            "pe64-const1e-2:$PE64,line_search=false,filter_lr=1e-2" \
            "pe64-schedule1e-3:$PE64,line_search=false,filter_lr=1e-3,filter_schedule=true" ;;
    factors64)  # the study's factors at 64 channels on kodim05 (the GPU budget ended before the 256-channel ones)
        bench factors64 --names kodim05 --variants \
            "pe64-const1e-4:$PE64,line_search=false,filter_lr=1e-4" \
            "pe64-const1e-2:$PE64,line_search=false,filter_lr=1e-2" \
            "pe64-schedule1e-3:$PE64,line_search=false,filter_lr=1e-3,filter_schedule=true" \
            "pe64-ls-gradient:$PE64,direction=gradient" \
            "pe64-depth1:$PE64,filter_layers=1" \
            "pe64-bias:$PE64,filter_bias=true" \
            "pe64-init-identity:$PE64,filter_init=identity" ;;
    sigma)  # RFF sigma 20 and 40 (256 channels) on kodim05, 5000 iterations: the GPU runs stopped at sigma 10
        bench sigma --names kodim05 --variants "filt-rff128-s20:filtered-rff,rff_frequencies=128,rff_sigma=20" \
            "plain-rff128-s40:mlp-rff,rff_frequencies=128,rff_sigma=40" \
            "filt-rff128-s40:filtered-rff,rff_frequencies=128,rff_sigma=40" ;;
    sigma2000)  # filtered RFF at sigma 20 and 40 with 2000 iterations only (0.6 s per iteration on one core)
        bench sigma2000 --names kodim05 --iters 2000 \
            --variants "filt-rff128-s20:filtered-rff,rff_frequencies=128,rff_sigma=20" \
            "filt-rff128-s40:filtered-rff,rff_frequencies=128,rff_sigma=40" ;;
    bound64)  # the line search's upper bound raised to 1e-2, on the four images
        bench bound64 --variants "pe64-ls-max1e-2:$PE64,lr_max=1e-2" ;;
    const64)  # constant filter rate 1e-2 on the other three images (kodim05 is in factors64)
        bench const64 --names kodim01 kodim13 kodim15 --variants "pe64-const1e-2:$PE64,line_search=false,filter_lr=1e-2" ;;
    depth64)  # filter depth 2, 4 and 5 on kodim05 (1 is in factors64)
        bench depth64 --names kodim05 --variants "pe64-depth2:$PE64,filter_layers=2" \
            "pe64-depth4:$PE64,filter_layers=4" "pe64-depth5:$PE64,filter_layers=5" ;;
    init64)  # scaled default initialisation and a higher bound on kodim05
        bench init64 --names kodim05 --variants "pe64-init-scaled0.3:$PE64,filter_init=scaled,filter_init_gain=0.3" \
            "pe64-init-scaled3:$PE64,filter_init=scaled,filter_init_gain=3" "pe64-ls-max3e-2:$PE64,lr_max=3e-2" ;;
    scale64)  # the log-linear PE's scale at 64 channels on kodim05, with and without the filter (32 is filt-pe64)
        args=()
        for s in 8 16 64 128; do
            args+=("plain-pe64-scale$s:mlp-pe,pe=loglinear,pe_frequencies=16,pe_scale=$s" "filt-pe64-scale$s:$PE64,pe_scale=$s")
        done
        bench scale64 --names kodim05 --variants "${args[@]}" ;;
    unbounded64)  # the line search with its bound out of the way (lr_max = 1): does the rule then adapt?
        bench unbounded64 --names kodim05 --variants "pe64-ls-max1:$PE64,lr_max=1" ;;
    long64-filt)  # the paper's 20k iterations at 64 channels, the two sides of the target on separate cores
        bench long64-filt --names kodim05 kodim13 kodim01 kodim15 --iters 20000 --variants "filt-pe64:$PE64" ;;
    long64-eqp)  # the plain MLP widened to the filtered network's parameters (width 96: 25,155 against 24,963)
        bench long64-eqp --names kodim05 kodim13 kodim01 kodim15 --iters 20000 "${REF64[@]}" \
            --variants "eqp-pe64:$PLAIN64,match_params=filt-pe64" ;;
    deep64)  # the plain MLP deepened instead to the filtered network's parameters (5 hidden layers: 25,155)
        bench deep64 "${REF64[@]}" --variants "$DEEP64" ;;
    width80)  # 80 channels (20 frequencies per axis), between 64 and 128, with its equal-parameter MLP
        # shellcheck disable=SC2086
        bench width80 --names ${NAMES:-kodim01 kodim05 kodim13 kodim15} --variants "$FILT80" "$EQP80" \
            "plain-pe80:$PLAIN80" ;;
    pe128-k15)  # the 128-channel filtered run that the GPU budget left out on kodim15
        bench pe128-k15 --names kodim15 --variants "filt-pe128:$PE,pe_frequencies=32" ;;
    long64-deep)  # the same at 20k iterations (NAMES="kodim05 kodim13" picks images, e.g. to split across cores)
        # shellcheck disable=SC2086
        bench long64-deep --names ${NAMES:-kodim05 kodim13 kodim01 kodim15} --iters 20000 "${REF64[@]}" \
            --variants "$DEEP64" ;;
    deep80)  # the 80-channel filter's equal-parameter MLP made deeper instead (NAMES= picks images)
        # shellcheck disable=SC2086
        bench deep80 --names ${NAMES:-kodim01 kodim05 kodim13 kodim15} "${REF80[@]}" --variants "$DEEP80" ;;
    long80-filt)  # 80 channels at 20k iterations, the two sides of the target on separate cores
        # shellcheck disable=SC2086
        bench long80-filt --names ${NAMES:-kodim13 kodim01 kodim15 kodim05} --iters 20000 --variants "$FILT80" ;;
    long80-eqp)
        # shellcheck disable=SC2086
        bench long80-eqp --names ${NAMES:-kodim13 kodim01 kodim15 kodim05} --iters 20000 "${REF80[@]}" \
            --variants "$EQP80" ;;
    long80-deep)  # the deeper equal-parameter MLP at 20k iterations (NAMES= picks images)
        # shellcheck disable=SC2086
        bench long80-deep --names ${NAMES:-kodim15 kodim05 kodim13 kodim01} --iters 20000 "${REF80[@]}" \
            --variants "$DEEP80" ;;
    *) echo "unknown part $part" >&2; exit 2 ;;
    esac
done
