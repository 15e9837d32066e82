#!/usr/bin/env bash
# Download the wheels that a GPU machine with torch but without nerfstudio needs to run rff-nerf-bench
# (scripts/bench_nerf_gpu.sh) or, with tyro among them, rff-image there, into .whl/nerf (23 MB on 2026-11-28; the
# device's carry limit is 64 MiB). Versions are those of this machine's .venv; python 3.12, manylinux x86_64. The lent
# GPU machines already had opencv-python-headless, tensorboard, protobuf, absl-py, simplejson and imageio, so they are
# left out. Install them there with
# `python -m pip install --no-index --no-deps --target .whl/site .whl/nerf/*.whl` and PYTHONPATH=$PWD/.whl/site.
#
# usage: scripts/gpu_nerf_wheels.sh [PYTHON_VERSION]      (default 3.12)
set -euo pipefail
cd "$(dirname "$0")/.."
PY_VERSION=${1:-3.12}
PIP=${PIP:-.venv/bin/pip}
version() { .venv/bin/python -c "import importlib.metadata as m; print(m.version('$1'))"; }
pinned() { for name in "$@"; do echo "$name==$(version "$name")"; done; }
mkdir -p .whl/nerf
# nerfstudio and what its training imports that the GPU machine lacked, at the versions the tests ran with; fpsample
# unpinned: the .venv's 1.0.2 has no wheel for python 3.12
# shellcheck disable=SC2046
"$PIP" download -q --no-deps --only-binary=:all: --python-version "$PY_VERSION" --dest .whl/nerf \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
    $(pinned nerfstudio tyro viser nerfacc gsplat websockets msgspec dill docstring_parser typeguard rawpy pathos \
        multiprocess ppft pyquaternion splines tensorly torch_fidelity pytorch-msssim appdirs) fpsample
du -sh .whl/nerf
