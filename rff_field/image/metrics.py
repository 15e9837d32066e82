"""Image quality metrics: PSNR, SSIM and (when its weights can be loaded) LPIPS, for images in [0, 1]."""

from __future__ import annotations

import math
from typing import Callable, Optional, Union

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from rff_field.common.lpips import load_lpips

_lpips_model: Optional[torch.nn.Module] = None
LPIPS_MIN_SIDE = 31
"""The smallest side AlexNet's five stages accept (its pooling leaves nothing of a smaller image)."""


def psnr_from_mse(mse: Union[float, Tensor]) -> Union[float, Tensor]:
    """PSNR in dB of a mean squared error for signals in [0, 1]: ``-10 log10(mse)`` (inf for zero error)."""
    if isinstance(mse, Tensor):
        return -10.0 * torch.log10(mse)
    return math.inf if mse <= 0 else -10.0 * math.log10(mse)


def psnr(prediction: Float[Tensor, "*bs"], target: Float[Tensor, "*bs"]) -> float:
    """PSNR in dB between two images in [0, 1]."""
    return float(psnr_from_mse(float(torch.mean((prediction.float() - target.float()) ** 2))))


def ssim(prediction: Float[Tensor, "H W C"], target: Float[Tensor, "H W C"]) -> float:
    """Structural similarity (scikit-image, Gaussian-free 7x7 windows, data range 1), averaged over channels."""
    from skimage.metrics import structural_similarity

    pred = prediction.detach().float().clamp(0, 1).cpu().numpy().astype(np.float64)
    gt = target.detach().float().cpu().numpy().astype(np.float64)
    win = min(7, pred.shape[0], pred.shape[1])
    win -= 1 - win % 2  # odd
    return float(structural_similarity(gt, pred, data_range=1.0, channel_axis=-1, win_size=win))


@torch.no_grad()
def lpips(
    prediction: Float[Tensor, "H W C"],
    target: Float[Tensor, "H W C"],
    notify: Optional[Callable[[str], None]] = None,
) -> Optional[float]:
    """LPIPS (AlexNet) between two images in [0, 1]; None when the weights are unavailable.

    Grayscale images are repeated to three channels. None, with a notice, for an image smaller than
    :data:`LPIPS_MIN_SIDE` on a side.
    """
    global _lpips_model
    if min(prediction.shape[:2]) < LPIPS_MIN_SIDE:
        height, width = prediction.shape[:2]
        if notify is not None:
            notify(f"LPIPS skipped: the image is {width}x{height}, and AlexNet needs at least "
                   f"{LPIPS_MIN_SIDE}x{LPIPS_MIN_SIDE} pixels; PSNR and SSIM are still computed")  # fmt: skip
        return None
    if _lpips_model is None:
        _lpips_model = load_lpips(notify or (lambda message: None))
    if _lpips_model is None:
        return None

    def prepare(image: Tensor) -> Tensor:
        nchw = image.detach().float().clamp(0, 1).cpu().permute(2, 0, 1)[None]
        return nchw.expand(1, 3, *nchw.shape[2:]) if nchw.shape[1] == 1 else nchw

    return float(_lpips_model(prepare(prediction), prepare(target)))


def image_metrics(
    prediction: Float[Tensor, "H W C"],
    target: Float[Tensor, "H W C"],
    with_lpips: bool = True,
    notify: Optional[Callable[[str], None]] = None,
) -> dict[str, Optional[float]]:
    """``psnr``, ``ssim`` and ``lpips`` (None when skipped or unavailable) of a reconstruction."""
    return {
        "psnr": psnr(prediction, target),
        "ssim": ssim(prediction, target),
        "lpips": lpips(prediction, target, notify) if with_lpips else None,
    }
