# Variants of the reproduction study (issue 6), sourced by scripts/study_reproduction.sh.
# Base: the paper's method with its own log-linear PE made wide: filtered-pe,pe=loglinear (64 frequencies per
# axis up to scale 32: 256 channels), 3x64 INR on Kodak x4, Adam 1e-3 with 0.1**(t/T), line search (paper rule).
BASE="filtered-pe,pe=loglinear"

# One factor at a time, 5000 iterations, 4 images.
STUDY_FACTORS=(
  # the three reference networks at the base embedding
  "plain-pe256:mlp-pe,pe=loglinear"
  "filt-pe256:$BASE"
  "eqp-pe256:mlp-pe,pe=loglinear,match_params=filt-pe256"
  # embedding width: log-linear PE with 8/16/32 frequencies per axis (32/64/128 channels), scale 32
  "plain-pe32:mlp-pe,pe=loglinear,pe_frequencies=8"
  "filt-pe32:$BASE,pe_frequencies=8"
  "eqp-pe32:mlp-pe,pe=loglinear,pe_frequencies=8,match_params=filt-pe32"
  "plain-pe64:mlp-pe,pe=loglinear,pe_frequencies=16"
  "filt-pe64:$BASE,pe_frequencies=16"
  "eqp-pe64:mlp-pe,pe=loglinear,pe_frequencies=16,match_params=filt-pe64"
  "plain-pe128:mlp-pe,pe=loglinear,pe_frequencies=32"
  "filt-pe128:$BASE,pe_frequencies=32"
  "eqp-pe128:mlp-pe,pe=loglinear,pe_frequencies=32,match_params=filt-pe128"
  # WIRE's Nyquist PE with more bands (L=5 is the preset mlp-pe / filtered-pe)
  "plain-wire5:mlp-pe"
  "filt-wire5:filtered-pe"
  "plain-wire7:mlp-pe,pe_bands=7"
  "filt-wire7:filtered-pe,pe_bands=7"
  "plain-wire9:mlp-pe,pe_bands=9"
  "filt-wire9:filtered-pe,pe_bands=9"
  # filter initialisation
  "init-identity:$BASE,filter_init=identity"
  "init-orthogonal:$BASE,filter_init=orthogonal"
  "init-scaled0.3:$BASE,filter_init=scaled,filter_init_gain=0.3"
  "init-scaled3:$BASE,filter_init=scaled,filter_init_gain=3"
  # how the filter learns
  "const1e-4:$BASE,line_search=false,filter_lr=1e-4"
  "const1e-3:$BASE,line_search=false,filter_lr=1e-3"
  "const1e-2:$BASE,line_search=false,filter_lr=1e-2"
  "schedule1e-3:$BASE,line_search=false,filter_lr=1e-3,filter_schedule=true"
  "ls-gradient:$BASE,direction=gradient"
  "ls-max1e-2:$BASE,lr_max=1e-2"
  "balance:$BASE,rule=balance"
  "balance-max1e-2:$BASE,rule=balance,lr_max=1e-2"
  # filter depth and bias
  "depth1:$BASE,filter_layers=1"
  "depth2:$BASE,filter_layers=2"
  "depth4:$BASE,filter_layers=4"
  "depth5:$BASE,filter_layers=5"
  "bias:$BASE,filter_bias=true"
)

# RFF: sigma 1..40 with 128 and 256 frequencies, with and without the filter, 5000 iterations, 4 images.
STUDY_RFF=()
for n in 128 256; do
  for s in 1 5 10 20 40; do
    STUDY_RFF+=("plain-rff${n}-s${s}:mlp-rff,rff_frequencies=$n,rff_sigma=$s" "filt-rff${n}-s${s}:filtered-rff,rff_frequencies=$n,rff_sigma=$s")
  done
done

# The paper's budget: 20k iterations, 4 images.
STUDY_LONG=(
  "plain-pe256:mlp-pe,pe=loglinear"
  "filt-pe256:$BASE"
  "eqp-pe256:mlp-pe,pe=loglinear,match_params=filt-pe256"
  "const1e-3:$BASE,line_search=false,filter_lr=1e-3"
  "schedule1e-3:$BASE,line_search=false,filter_lr=1e-3,filter_schedule=true"
  "balance:$BASE,rule=balance"
)
