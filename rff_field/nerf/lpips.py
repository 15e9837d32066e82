"""Optional LPIPS: torchmetrics' LPIPS downloads AlexNet weights when built, which fails offline.

:func:`load_lpips` returns the metric when it can be built, else ``None`` after one notice per process, so that
training and evaluation go on with PSNR and SSIM.
"""

from __future__ import annotations

from typing import Optional

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
