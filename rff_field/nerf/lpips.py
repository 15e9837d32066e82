"""LPIPS for NeRF models: a notice on nerfstudio's console when its weights cannot be loaded, and a NaN stand-in.

:func:`lpips_or_nan` lets nerfstudio's own models, which build LPIPS at once, be built and evaluated offline too
(their LPIPS is then NaN).
"""

from __future__ import annotations

import contextlib
from typing import Iterator, Optional

import torch
from nerfstudio.utils.rich_utils import CONSOLE
from torch import nn

from rff_field.common import lpips


def load_lpips() -> Optional[nn.Module]:
    """torchmetrics' LPIPS, or ``None`` after one notice per process on nerfstudio's console."""
    return lpips.load_lpips(lambda message: CONSOLE.print(f"[yellow]Notice: {message}.[/yellow]", soft_wrap=True))


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
