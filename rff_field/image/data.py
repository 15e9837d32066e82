"""Images for 2D regression: a file (or scikit-image's astronaut) as floats in [0, 1], area downsampling, pixel
coordinates, PNG output."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

from rff_field.core.errors import UsageError

logger = logging.getLogger(__name__)
MIN_SIDE = 3
"""The smallest image side (SSIM's smallest window)."""


def load_image(path: Optional[Path], option: str = "--image") -> tuple[Float[Tensor, "H W C"], str]:
    """The pixels (``[H, W, C]``, C = 1 or 3, in [0, 1]) and name of an image file, or of scikit-image's astronaut
    when ``path`` is None. An alpha channel is dropped with a notice; other colour spaces are converted to RGB.

    Raises:
        UsageError: Naming ``option`` and the file, if it is missing or not an image.
    """
    if path is None:
        from skimage import data

        array, name = data.astronaut(), "astronaut"
    else:
        from PIL import Image, UnidentifiedImageError

        name = Path(path).stem
        if not Path(path).is_file():
            raise UsageError(f"{option} {path}: no such file; give a PNG or JPEG file")
        try:
            with Image.open(path) as image:
                if getattr(image, "n_frames", 1) > 1:
                    raise UsageError(f"{option} {path} holds {image.n_frames} frames; give a still image")
                if image.mode in ("LA", "RGBA", "PA") or "transparency" in image.info:
                    logger.info(f"{Path(path).name} has an alpha channel; it is ignored")
                if image.mode not in ("L", "RGB", "I;16", "I", "F"):
                    image = image.convert("L" if image.mode in ("LA", "1") else "RGB")
                array = np.asarray(image)
        except (UnidentifiedImageError, OSError) as error:
            raise UsageError(f"{option} {path} cannot be read as an image ({type(error).__name__}); give a PNG or "
                             "JPEG file") from None  # fmt: skip
    array = array[..., None] if array.ndim == 2 else array
    if min(array.shape[:2]) < MIN_SIDE:
        raise UsageError(f"{option} {path}: the image is {array.shape[1]}x{array.shape[0]} pixels; give one of at "
                         f"least {MIN_SIDE}x{MIN_SIDE}")  # fmt: skip
    if np.issubdtype(array.dtype, np.integer):
        scale = 65535.0 if array.max() > 255 else 255.0  # Pillow reads 16-bit grayscale as 32-bit integers
        array = array.astype(np.float64) / scale
    return torch.from_numpy(np.clip(array, 0.0, 1.0).astype(np.float32)), name


def downsample(pixels: Float[Tensor, "H W C"], factor: int) -> Float[Tensor, "h w C"]:
    """Area resampling by an integer factor: each output pixel is the mean of the input pixels it covers."""
    height, width = pixels.shape[0] // factor, pixels.shape[1] // factor
    if min(height, width) < MIN_SIDE:
        raise UsageError(f"--downsample {factor} leaves under {MIN_SIDE}x{MIN_SIDE} of a {pixels.shape[1]}x"
                         f"{pixels.shape[0]} image; use a smaller factor")  # fmt: skip
    if factor == 1:
        return pixels
    chw = pixels.permute(2, 0, 1)[None]
    return F.interpolate(chw, size=(height, width), mode="area")[0].permute(1, 2, 0).contiguous()


def pixel_coordinates(height: int, width: int) -> Float[Tensor, "HW 2"]:
    """Coordinates ``(x, y)`` of every pixel in [-1, 1] (``linspace`` per axis, as the WIRE repository), row-major."""
    y, x = torch.meshgrid(torch.linspace(-1, 1, height), torch.linspace(-1, 1, width), indexing="ij")
    return torch.stack([x, y], dim=-1).reshape(-1, 2)
