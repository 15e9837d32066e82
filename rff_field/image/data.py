"""Images for 2D regression: the one image reader (to [0, 1], or refused), area downsampling, pixel coordinates."""

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
    when ``path`` is None; a :class:`UsageError` names ``option`` and the file."""
    if path is None:
        from skimage import data

        array, name = data.astronaut() / 255.0, "astronaut"
    else:
        name = Path(path).stem
        if not Path(path).is_file():
            raise UsageError(f"{option} {path}: no such file; give a PNG, JPEG or TIFF file")
        array = read_pixels(Path(path), option)
    array = array[..., None] if array.ndim == 2 else array
    if min(array.shape[:2]) < MIN_SIDE:
        raise UsageError(f"{option} {path}: the image is {array.shape[1]}x{array.shape[0]} pixels; give one of at "
                         f"least {MIN_SIDE}x{MIN_SIDE}")  # fmt: skip
    return torch.from_numpy(array.astype(np.float32)), name


def read_pixels(path: Path, option: str = "--image") -> Float[np.ndarray, "H W *C"]:
    """An image file's pixels in [0, 1] as a viewer shows them (scaled by its bit depth's range, other modes made RGB
    or grayscale, alpha dropped with a notice); what cannot be mapped is a :class:`UsageError`."""
    from PIL import Image, ImageOps

    try:
        with Image.open(path) as image:
            if getattr(image, "n_frames", 1) > 1:
                raise UsageError(f"{option} {path} holds {image.n_frames} frames; give a still image")
            if image.mode in ("LA", "La", "PA", "RGBA", "RGBa") or "transparency" in image.info:
                logger.info(f"{path.name} has an alpha channel; it is ignored")
            if image.mode in ("RGB", "RGBA") and any("16" in str(tile.args) for tile in image.tile):
                logger.info(f"{path.name} has 16-bit colour channels, which are read with 8 bits")
            scale = integer_range(image)
            image = ImageOps.exif_transpose(image)
            if scale is None and image.mode != "F":
                image = image.convert("LA" if image.mode in ("1", "LA", "La") else "RGBA")
                scale = 255.0  # the alpha channel is dropped below
            array = np.asarray(image, dtype=np.float64)
            array = array[..., :-1] if image.mode in ("LA", "RGBA") else array
    except UsageError:
        raise
    except Exception as error:  # Pillow's decoders raise many types (OSError, ValueError, SyntaxError, ...)
        raise UsageError(f"{option} {path} cannot be read as an image ({type(error).__name__}); give a PNG, JPEG or "
                         "TIFF file") from None  # fmt: skip
    if scale == 0:
        raise UsageError(f"{option} {path} holds 32-bit integer pixels, which have no defined range; convert it to 8 "
                         "or 16 bits")  # fmt: skip
    array = array / (scale or 1.0)
    if not np.isfinite(array).all():
        raise UsageError(f"{option} {path} holds non-finite pixel values (NaN or infinity)")
    if array.size and (array.min() < 0 or array.max() > 1):
        raise UsageError(f"{option} {path} holds values from {array.min() * (scale or 1):g} to "
                         f"{array.max() * (scale or 1):g}; float pixels must lie in [0, 1]")  # fmt: skip
    return array


def integer_range(image) -> Optional[float]:
    """The largest value of a Pillow image's integer pixels as the file stores them (255 for 8 bits, 65535 for 16,
    TIFF's BitsPerSample otherwise); 0 for integers without a known range; None for modes to convert first."""
    if image.mode in ("L", "RGB"):
        return 255.0
    if image.mode not in ("I", "I;16", "I;16B", "I;16L", "I;16N"):
        return None
    if image.format == "TIFF":
        bits, sample_format = image.tag_v2.get(258, (16,)), image.tag_v2.get(339, 1)
        bits = bits[0] if isinstance(bits, tuple) else bits
        sample_format = sample_format[0] if isinstance(sample_format, tuple) else sample_format
        return float(2**bits - 1) if bits <= 16 and sample_format == 1 else 0.0
    return 65535.0  # PNG and PPM: 16 bits (Pillow scales other PPM maxima to 16 bits)


def check_pixels(pixels: Tensor, name: str) -> None:
    """Raise :class:`UsageError` unless ``pixels`` is a finite float ``[H, W, C]`` tensor, :data:`MIN_SIDE` a side."""
    if not isinstance(pixels, Tensor) or pixels.ndim != 3 or not pixels.is_floating_point() or 0 in pixels.shape:
        shape = tuple(pixels.shape) if isinstance(pixels, Tensor) else type(pixels).__name__
        raise UsageError(f"the pixels of {name} must be a floating-point [H, W, C] tensor, got {shape}")
    if min(pixels.shape[:2]) < MIN_SIDE:
        raise UsageError(f"{name} is {pixels.shape[1]}x{pixels.shape[0]} pixels; give one of at least {MIN_SIDE}x"
                         f"{MIN_SIDE}")  # fmt: skip
    if not bool(torch.isfinite(pixels).all()):
        raise UsageError(f"the pixels of {name} are not all finite (NaN or infinity)")


def downsample_factor(resolution_scale: float, option: str = "--resolution-scale") -> int:
    """The area-downsampling factor ``k`` of a resolution scale ``1/k`` (another scale is a :class:`UsageError`)."""
    valid = isinstance(resolution_scale, (int, float)) and 1e-9 < resolution_scale <= 1
    factor = round(1 / resolution_scale) if valid else 0
    if factor < 1 or abs(factor * resolution_scale - 1) > 1e-9:
        raise UsageError(f"{option} {resolution_scale:g}: an image is fitted at 1/k of its resolution for an integer "
                         "k (1, 0.5, 0.25, ...)")  # fmt: skip
    return factor


def downsample(pixels: Float[Tensor, "H W C"], factor: int) -> Float[Tensor, "h w C"]:
    """Area resampling by an integer factor: each output pixel is the mean of the input pixels it covers."""
    height, width = pixels.shape[0] // factor, pixels.shape[1] // factor
    if min(height, width) < MIN_SIDE:
        raise UsageError(f"--resolution-scale {1 / factor:g} leaves under {MIN_SIDE}x{MIN_SIDE} of a {pixels.shape[1]}x"
                         f"{pixels.shape[0]} image; use a larger one")  # fmt: skip
    if factor == 1:
        return pixels
    chw = pixels.permute(2, 0, 1)[None]
    return F.interpolate(chw, size=(height, width), mode="area")[0].permute(1, 2, 0).contiguous()


def pixel_coordinates(height: int, width: int) -> Float[Tensor, "HW 2"]:
    """Coordinates ``(x, y)`` of every pixel in [-1, 1] (``linspace`` per axis, as the WIRE repository), row-major."""
    y, x = torch.meshgrid(torch.linspace(-1, 1, height), torch.linspace(-1, 1, width), indexing="ij")
    return torch.stack([x, y], dim=-1).reshape(-1, 2)
