#!/usr/bin/env bash
# Download the wheels a GPU machine with torch but without nerfstudio needs to run scripts/gpu_nerf.sh, in two
# folders that each stay under the device's 64 MiB carry limit: .whl/nerf-a (opencv, 50 MB) and .whl/nerf-b (the
# rest, 27 MB). Versions are those of this machine's .venv; python 3.12, manylinux x86_64. benchmarks/nerf/gpu.md
# says how to carry and install them.
#
# usage: scripts/gpu_nerf_wheels.sh [PYTHON_VERSION]      (default 3.12)
set -euo pipefail
cd "$(dirname "$0")/.."
PY_VERSION=${1:-3.12}
PIP=${PIP:-.venv/bin/pip}
version() { .venv/bin/python -c "import importlib.metadata as m; print(m.version('$1'))"; }
download() {  # download FOLDER PACKAGE...
    local folder=$1; shift
    mkdir -p "$folder"
    "$PIP" download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" --dest "$folder" \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 "$@"
}
pinned() { for name in "$@"; do echo "$name==$(version "$name")"; done; }
download .whl/nerf-a "$(pinned opencv-python-headless)"
# nerfstudio and what its training imports that the GPU machine lacked (torch, numpy, scipy, matplotlib,
# scikit-image, jaxtyping, rich, torchmetrics, pillow and pyyaml are there); pinned where the version matters
# shellcheck disable=SC2046
download .whl/nerf-b $(pinned nerfstudio tyro viser nerfacc gsplat protobuf) websockets msgspec dill docstring_parser \
    typeguard tensorboard absl-py rawpy pathos multiprocess ppft pyquaternion splines tensorly fpsample torch_fidelity \
    pytorch-msssim simplejson imageio appdirs
du -sh .whl/nerf-a .whl/nerf-b
