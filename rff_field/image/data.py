"""Images for 2D regression: reading any PNG/JPEG into floats in [0, 1], area downsampling, pixel coordinates."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import torch
import torch.nn.functional as F
from jaxtyping import Float
from torch import Tensor

from rff_field.common.outputs import written_atomically
from rff_field.core.errors import UsageError

MIN_SIDE = 3
"""The smallest image side: SSIM's smallest window is 3x3."""


@dataclass
class LoadedImage:
    """An image as floats in [0, 1], ``[H, W, C]`` with C = 1 (grayscale) or 3 (RGB).

    Args:
        pixels: The pixel values.
        name: A short name (the file's stem).
        source: Where it came from (an absolute path, or a description of the bundled image).
        notices: Things the user should know about the conversion (e.g. a dropped alpha channel).
    """

    pixels: Float[Tensor, "H W C"]
    name: str
    source: str
    notices: list[str] = field(default_factory=list)

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def channels(self) -> int:
        return int(self.pixels.shape[2])


def to_unit_float(array: np.ndarray, name: str = "image") -> tuple[np.ndarray, list[str]]:
    """Convert decoded pixels to float32 ``[H, W, C]`` in [0, 1] with C in {1, 3}.

    Integer images are divided by their type's maximum (255 for 8-bit, 65535 for 16-bit); float images are
    taken as already in [0, 1] and clipped. Grayscale becomes one channel; an alpha channel is dropped (with a
    notice); two-channel images are read as grayscale plus alpha.

    Args:
        array: Decoded pixels, ``[H, W]`` or ``[H, W, C]``.
        name: Name used in messages.

    Returns:
        The converted pixels and a list of notices.
    """
    notices: list[str] = []
    if array.ndim == 2:
        array = array[..., None]
    if array.ndim != 3 or array.shape[2] not in (1, 2, 3, 4):
        raise UsageError(f"{name}: expected a grayscale, RGB or RGBA image, got an array of shape {array.shape}; "
                         "save it as a PNG or JPEG of one of those")  # fmt: skip
    if array.shape[0] < MIN_SIDE or array.shape[1] < MIN_SIDE:
        size = f"{array.shape[1]}x{array.shape[0]}"
        raise UsageError(f"{name}: the image is {size} pixels; give an image of at least {MIN_SIDE}x{MIN_SIDE}")
    if array.shape[2] in (2, 4):
        notices.append(f"{name} has an alpha channel; it is ignored (the colour channels are fitted as they are)")
        array = array[..., :-1]
    if array.dtype == np.bool_:
        out = array.astype(np.float32)
    elif np.issubdtype(array.dtype, np.integer):
        maximum = np.iinfo(array.dtype).max
        out = array.astype(np.float64) / maximum
    elif np.issubdtype(array.dtype, np.floating):
        out = np.clip(array.astype(np.float64), 0.0, 1.0)
    else:
        raise UsageError(f"{name}: unsupported pixel type {array.dtype}; save the image as an 8- or 16-bit PNG")
    return np.ascontiguousarray(out, dtype=np.float32), notices


def load_image(path: Optional[Path] = None) -> LoadedImage:
    """Read an image file (PNG, JPEG, anything imageio reads), or scikit-image's bundled astronaut if ``path`` is
    None.

    Raises:
        UsageError: If the file is missing, not a file, or cannot be decoded as an image.
    """
    if path is None:
        from skimage import data

        pixels, notices = to_unit_float(data.astronaut(), "astronaut")
        return LoadedImage(torch.from_numpy(pixels), "astronaut", "scikit-image data.astronaut()", notices)
    path = Path(path)
    if not path.exists():
        raise UsageError(f"image not found: {path}; check the path")
    if not path.is_file():
        raise UsageError(f"{path} is not a file; give the path of a PNG or JPEG file")
    if path.stat().st_size == 0:
        raise UsageError(f"{path} is empty (0 bytes); replace it with a PNG or JPEG file")
    notices: list[str] = []
    array = None
    if _png_header(path) in ((16, 2), (16, 6)):  # 16-bit RGB(A): Pillow would truncate it to 8 bits
        array = _read_with_opencv(path)
        if array is None:
            notices.append(f"{path.name} is a 16-bit colour PNG read with 8-bit precision (install opencv for 16 bits)")
    if array is None:
        array = _read_as_rgb_if_other_colour_space(path, notices)
    if array is None:
        import imageio.v3 as iio

        try:
            array = np.asarray(iio.imread(path))
        except Exception as error:  # imageio raises many types for undecodable files, worded for developers
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            if not _has_image_signature(path):
                reason = "its contents are not an image of any known format"
            raise UsageError(f"cannot read {path} as an image ({reason}); give a PNG or JPEG file") from None
    if array.ndim == 4:  # frames of an animation (GIF, APNG, multi-page TIFF)
        if array.shape[0] != 1:
            raise UsageError(f"{path} holds {array.shape[0]} frames; give a still image (PNG or JPEG)")
        array = array[0]
    pixels, more = to_unit_float(array, path.name)
    return LoadedImage(torch.from_numpy(pixels), path.stem, str(path.absolute()), notices + more)


def _png_header(path: Path) -> Optional[tuple[int, int]]:
    """(bit depth, colour type) of a PNG file, None for other files."""
    with open(path, "rb") as handle:
        head = handle.read(26)
    if len(head) < 26 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return head[24], head[25]


def _read_as_rgb_if_other_colour_space(path: Path, notices: list[str]) -> Optional[np.ndarray]:
    """Pixels converted to RGB (with a notice) if Pillow reads the file as CMYK, YCbCr, LAB or HSV; else None.

    Without the conversion the fourth channel of a CMYK JPEG would pass for alpha and C, M, Y for R, G, B.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            if image.mode not in ("CMYK", "YCbCr", "LAB", "HSV"):
                return None
            notices.append(f"{path.name} is a {image.mode} image; it is converted to RGB")
            return np.asarray(image.convert("RGB"))
    except (UnidentifiedImageError, OSError):
        return None


def _has_image_signature(path: Path) -> bool:
    """Whether Pillow recognises the file's format from its first bytes."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path):
            return True
    except UnidentifiedImageError:
        return False
    except OSError:
        return True


def _read_with_opencv(path: Path) -> Optional[np.ndarray]:
    """Decode with OpenCV (keeps 16 bits per channel), as RGB(A); None if OpenCV is missing or cannot decode."""
    try:
        import cv2
    except ImportError:
        return None
    array = cv2.imdecode(np.fromfile(path, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if array is None:
        return None
    if array.ndim == 3 and array.shape[2] >= 3:
        array = np.concatenate([array[..., 2::-1], array[..., 3:]], axis=-1)  # BGR(A) -> RGB(A)
    return array


def downsample(pixels: Float[Tensor, "H W C"], factor: int) -> Float[Tensor, "h w C"]:
    """Area resampling by an integer factor: each output pixel is the mean of the input pixels it covers.

    The output is ``floor(H / factor) x floor(W / factor)``; for non-divisible sizes the covered areas overlap
    slightly (``torch``'s adaptive average pooling).
    """
    if factor < 1:
        raise UsageError(f"the downsampling factor must be at least 1, got {factor}")
    if factor == 1:
        return pixels
    height, width = pixels.shape[0] // factor, pixels.shape[1] // factor
    if height < MIN_SIDE or width < MIN_SIDE:
        raise UsageError(
            f"downsampling {pixels.shape[1]}x{pixels.shape[0]} by {factor} leaves under {MIN_SIDE}x{MIN_SIDE} pixels; "
            "use a smaller --downsample"
        )
    chw = pixels.permute(2, 0, 1)[None]
    return F.interpolate(chw, size=(height, width), mode="area")[0].permute(1, 2, 0).contiguous()


def check_pixels(pixels: object) -> None:
    """Raise :class:`UsageError` unless ``pixels`` is a float tensor (H, W, C) of values in [0, 1], at least
    ``MIN_SIDE`` a side (what the fitters take; :func:`load_image` gives it)."""
    if not isinstance(pixels, Tensor) or pixels.dim() != 3 or not pixels.is_floating_point():
        got = f"{pixels.dtype} tensor of shape {tuple(pixels.shape)}" if isinstance(pixels, Tensor) else type(pixels)
        raise UsageError(f"the pixels must be a float tensor (H, W, C) of values in [0, 1], got a {got}; "
                         "load_image gives one")  # fmt: skip
    if min(pixels.shape[:2]) < MIN_SIDE or pixels.shape[2] < 1:
        raise UsageError(f"an image of {tuple(pixels.shape)} is too small: at least {MIN_SIDE}x{MIN_SIDE} pixels")
    lo, hi = float(pixels.min()), float(pixels.max())
    if not (0 <= lo and hi <= 1):
        raise UsageError(f"the pixel values span {lo:g} to {hi:g}, not [0, 1]; divide 8-bit values by 255")


def pixel_coordinates(height: int, width: int) -> Float[Tensor, "HW 2"]:
    """Coordinates ``(x, y)`` of every pixel in [-1, 1] (``linspace`` per axis, as the WIRE repository), row-major."""
    y, x = torch.meshgrid(torch.linspace(-1, 1, height), torch.linspace(-1, 1, width), indexing="ij")
    return torch.stack([x, y], dim=-1).reshape(-1, 2)


def save_image(pixels: Float[Tensor, "H W C"] | np.ndarray, path: Path) -> None:
    """Write pixels in [0, 1] as an 8-bit PNG (one channel as grayscale)."""
    import imageio.v3 as iio

    array = pixels.detach().cpu().numpy() if isinstance(pixels, Tensor) else np.asarray(pixels)
    array = np.clip(np.rint(np.clip(array, 0.0, 1.0) * 255.0), 0, 255).astype(np.uint8)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[..., 0]
    with written_atomically(path) as temporary:
        iio.imwrite(temporary, array)
