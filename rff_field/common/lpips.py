"""LPIPS when its weights can be loaded.

torchmetrics' LPIPS downloads torchvision's AlexNet weights the first time it is built, which fails offline.
:func:`load_lpips` returns a new metric, or ``None`` with one notice per process, so that training and evaluation go
on with PSNR and SSIM.
"""

from __future__ import annotations

import contextlib
import io
from typing import Callable, Optional

from torch import nn

_failure: Optional[str] = None


def load_lpips(notify: Callable[[str], None]) -> Optional[nn.Module]:
    """torchmetrics' ``LearnedPerceptualImagePatchSimilarity(normalize=True)`` in eval mode, or ``None``.

    After the first failure in a process, later calls return ``None`` at once and ``notify`` is not called again.
    """
    global _failure
    if _failure is not None:
        return None
    try:
        from torchmetrics.image.lpip import LearnedPerceptualImagePatchSimilarity

        # torch.hub prints "Downloading: <url>" and a progress bar, also when the download then fails.
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return LearnedPerceptualImagePatchSimilarity(net_type="alex", normalize=True).eval()
    except Exception as error:  # offline: URLError; missing torchvision: ImportError; corrupt cache: RuntimeError
        message = str(error).strip()
        _failure = message.splitlines()[0] if message else type(error).__name__
        notify(f"LPIPS skipped: AlexNet's weights could not be loaded ({_failure}); PSNR and SSIM are still computed")
        return None
