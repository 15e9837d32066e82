"""The nerfstudio methods (``rff-nerf``, ``rff-nerfacto``) and what users do with their runs; this module imports only
the standard library, so commands can call :func:`quiet_known_warnings` before they import nerfstudio."""

import re
import warnings

NOISY_WARNINGS = (
    "`torch.jit.script` is deprecated",
    "Using a non-tuple sequence for multidimensional indexing",
    "`torch.cuda.amp.GradScaler",
    "Converting a tensor with requires_grad=True to a scalar",
    "Importing `spectral_angle_mapper`",
    "`torch.cuda.amp.custom_fwd(args...)` is deprecated",
    "`torch.cuda.amp.custom_bwd(args...)` is deprecated",
)
"""Warnings nerfstudio raises with recent torch, on import or every step; nothing for a user to act on."""


def quiet_known_warnings() -> None:
    """Hide :data:`NOISY_WARNINGS` in this process (the package's own commands call it; other warnings show)."""
    for message in NOISY_WARNINGS:
        warnings.filterwarnings("ignore", message=".*" + re.escape(message))
