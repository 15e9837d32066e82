"""How tests run nerfstudio's own commands: this repository importable, and its methods registered through
nerfstudio's environment variable (the entry points register them too once the package is (re)installed)."""

from __future__ import annotations

import os
from pathlib import Path

OUR_METHODS = (
    "rff-nerfacto=rff_field.nerf.method_configs:rff_nerfacto,"
    "rff-nerfacto-lite=rff_field.nerf.method_configs:rff_nerfacto_lite"
)
"""Methods registered through ``NERFSTUDIO_METHOD_CONFIGS`` (rff-nerf and rff-nerf-lite predate the variable)."""


def ns_environment() -> dict:
    """The environment for nerfstudio's commands: this repository first on the path, our methods registered."""
    repo = str(Path(__file__).resolve().parents[2])
    path = os.pathsep.join([repo, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return {**os.environ, "NERFSTUDIO_METHOD_CONFIGS": OUR_METHODS, "PYTHONPATH": path}
