"""Warnings that nerfstudio 1.1.5 raises on import or on every step with recent torch, hidden by the CLIs.

Standard library only, so that the filter is in place before nerfstudio is imported.
"""

from __future__ import annotations

import re
import warnings

NOISY_WARNINGS = (
    "`torch.jit.script` is deprecated",
    "Using a non-tuple sequence for multidimensional indexing",
    "`torch.cuda.amp.GradScaler",
    "Converting a tensor with requires_grad=True to a scalar",
    "Importing `spectral_angle_mapper`",
    "This DataLoader will create",
    "`torch.cuda.amp.custom_fwd(args...)` is deprecated",
    "`torch.cuda.amp.custom_bwd(args...)` is deprecated",
)
"""Nothing for users to act on; other warnings still show."""


def quiet_known_warnings() -> None:
    """Hide :data:`NOISY_WARNINGS`."""
    for message in NOISY_WARNINGS:
        warnings.filterwarnings("ignore", message=".*" + re.escape(message))
