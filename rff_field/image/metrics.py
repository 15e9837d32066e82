"""Image quality: PSNR, SSIM and (when AlexNet's weights can be loaded) LPIPS, for images in [0, 1]."""

from __future__ import annotations

import math
from typing import Optional

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from rff_field.common.lpips import load_lpips

LPIPS_MIN_SIDE = 31
"""The smallest side AlexNet's five stages accept."""


def psnr_from_mse(mse: float) -> float:
    """PSNR in dB of a mean squared error for signals in [0, 1] (inf for no error, nan for a nan error)."""
    return math.inf if mse == 0 else -10.0 * math.log10(mse) if mse > 0 else math.nan


def ssim(prediction: Float[Tensor, "H W C"], target: Float[Tensor, "H W C"]) -> float:
    """Structural similarity (scikit-image, 7x7 windows, data range 1), averaged over channels."""
    from skimage.metrics import structural_similarity

    win = min(7, *prediction.shape[:2])
    win -= 1 - win % 2  # odd
    pred, true = (image.detach().cpu().double().numpy() for image in (prediction, target))
    return float(structural_similarity(true, np.clip(pred, 0, 1), data_range=1.0, channel_axis=-1, win_size=win))


@torch.no_grad()
def image_metrics(
    prediction: Float[Tensor, "H W C"], target: Float[Tensor, "H W C"], with_lpips: bool = True
) -> dict[str, Optional[float]]:
    """``psnr`` (of the unclipped prediction, as the loss sees it), ``ssim`` and ``lpips`` (None when unavailable)."""
    lpips = None
    if with_lpips and min(prediction.shape[:2]) >= LPIPS_MIN_SIDE and (metric := load_lpips()) is not None:
        pred, true = (image.cpu().float().clamp(0, 1).permute(2, 0, 1)[None].expand(1, 3, -1, -1)
                      for image in (prediction, target))  # fmt: skip
        lpips = float(metric(pred, true))
    mse = float(torch.mean((prediction.double() - target.double()) ** 2))
    return {"psnr": psnr_from_mse(mse), "ssim": ssim(prediction, target), "lpips": lpips}
