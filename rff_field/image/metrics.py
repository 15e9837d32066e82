"""Image quality metrics: PSNR, SSIM and (when its weights can be loaded) LPIPS, for images in [0, 1]."""

from __future__ import annotations

import math
from typing import Callable, Optional, Union

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

_LPIPS_UNAVAILABLE = object()
_lpips_models: dict[str, object] = {}


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


def lpips_model(net_type: str = "alex", notify: Optional[Callable[[str], None]] = None) -> Optional[torch.nn.Module]:
    """torchmetrics' LPIPS, or None when it cannot be built (its weights are downloaded on first use).

    The outcome is cached per process, so an offline machine tries (and ``notify`` is called) only once.
    """
    model = _lpips_models.get(net_type)
    if model is None:
        try:
            from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity

            model = LearnedPerceptualImagePatchSimilarity(net_type=net_type, normalize=True)
            model.eval()
        except Exception as error:  # offline: URLError; missing torchvision: ImportError; ...
            model = _LPIPS_UNAVAILABLE
            if notify is not None:
                reason = str(error).splitlines()[0] if str(error) else type(error).__name__
                notify(f"LPIPS skipped (reported as null): its {net_type} weights could not be loaded ({reason})")
        _lpips_models[net_type] = model
    return None if model is _LPIPS_UNAVAILABLE else model  # type: ignore[return-value]


@torch.no_grad()
def lpips(
    prediction: Float[Tensor, "H W C"],
    target: Float[Tensor, "H W C"],
    notify: Optional[Callable[[str], None]] = None,
) -> Optional[float]:
    """LPIPS (AlexNet) between two images in [0, 1]; None when the weights are unavailable.

    Grayscale images are repeated to three channels.
    """
    model = lpips_model("alex", notify)
    if model is None:
        return None

    def prepare(image: Tensor) -> Tensor:
        nchw = image.detach().float().clamp(0, 1).cpu().permute(2, 0, 1)[None]
        return nchw.expand(1, 3, *nchw.shape[2:]) if nchw.shape[1] == 1 else nchw

    return float(model(prepare(prediction), prepare(target)))


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
