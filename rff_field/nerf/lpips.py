"""Optional LPIPS: torchmetrics' LPIPS downloads AlexNet weights when built, which fails offline.

:func:`load_lpips` returns the metric when it can be built, else ``None`` after one notice per process, so that
training and evaluation go on with PSNR and SSIM. :func:`lpips_or_nan` lets nerfstudio's own models, which build
LPIPS at once, be built and evaluated offline too (their LPIPS is then NaN).
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import torch
from nerfstudio.utils.rich_utils import CONSOLE
from torch import nn

_notice_shown = False


def load_lpips() -> Optional[nn.Module]:
    """torchmetrics' ``LearnedPerceptualImagePatchSimilarity(normalize=True)``, or ``None`` if it cannot be built."""
    global _notice_shown
    try:
        from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity

        return LearnedPerceptualImagePatchSimilarity(normalize=True)
    except Exception as err:  # offline download, missing torchvision, corrupt cache...
        if not _notice_shown:
            reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            CONSOLE.print(
                f"[yellow]Notice: LPIPS is skipped (its AlexNet weights could not be loaded: {reason}); "
                "PSNR and SSIM are still computed.[/yellow]",
                soft_wrap=True,
            )
            _notice_shown = True
        return None


class NaNLPIPS(nn.Module):
    """Stands in for torchmetrics' LPIPS when its weights cannot be loaded: every score is NaN."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, image: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
        return torch.tensor(float("nan"))


@contextlib.contextmanager
def lpips_or_nan() -> Iterator[None]:
    """Within the block, torchmetrics' LPIPS class is :class:`NaNLPIPS` if the real one cannot be built."""
    from torchmetrics.image import lpip

    if load_lpips() is not None:
        yield
        return
    original = lpip.LearnedPerceptualImagePatchSimilarity
    lpip.LearnedPerceptualImagePatchSimilarity = NaNLPIPS  # type: ignore[misc]
    try:
        yield
    finally:
        lpip.LearnedPerceptualImagePatchSimilarity = original  # type: ignore[misc]
