# Sourced by the scripts/gpu_*.sh: PYTHON, and a PYTHONPATH that runs the repository without installing it, with the
# wheels of scripts/gpu_nerf_wheels.sh (carried as .whl) installed first where nerfstudio is missing.
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c "import nerfstudio" 2>/dev/null; then
    SITE=$(mktemp -d)
    "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/nerf/*.whl
    export PYTHONPATH=$SITE
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
