"""LPIPS when AlexNet's weights can be loaded (torchmetrics downloads them); offline, evaluation goes on without it."""

from __future__ import annotations

import contextlib
import functools
import io
import logging
from typing import Optional

from torch import nn


@functools.cache
def load_lpips() -> Optional[nn.Module]:
    """torchmetrics' AlexNet LPIPS for inputs in [0, 1], built once per process; None, after a notice, if it cannot."""
    try:
        from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity

        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):  # download chatter
            return LearnedPerceptualImagePatchSimilarity(net_type="alex", normalize=True).eval()
    except Exception as error:  # offline: URLError; missing torchvision: ImportError; damaged cache: RuntimeError
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        logging.getLogger(__name__).warning(f"LPIPS skipped: AlexNet's weights could not be loaded ({reason})")
        return None
