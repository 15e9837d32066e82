"""Reading images: formats, bit depths, alpha, bad files; area downsampling; pixel coordinates."""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from rff_field.image.data import UsageError, downsample, load_image, pixel_coordinates, to_unit_float


def test_rgb8_png_is_scaled_by_255(tmp_path):
    array = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3) * 4
    iio.imwrite(tmp_path / "a.png", array)
    image = load_image(tmp_path / "a.png")
    assert image.pixels.shape == (4, 5, 3) and image.pixels.dtype == torch.float32
    assert torch.allclose(image.pixels, torch.from_numpy(array / 255.0).float())
    assert image.name == "a" and not image.notices


def test_grayscale_becomes_one_channel(tmp_path):
    array = np.linspace(0, 255, 36).astype(np.uint8).reshape(6, 6)
    iio.imwrite(tmp_path / "g.png", array)
    image = load_image(tmp_path / "g.png")
    assert image.pixels.shape == (6, 6, 1)
    assert float(image.pixels.max()) == 1.0


def test_rgba_drops_alpha_with_a_notice(tmp_path):
    array = np.full((4, 4, 4), 200, dtype=np.uint8)
    array[..., 3] = 17
    iio.imwrite(tmp_path / "rgba.png", array)
    image = load_image(tmp_path / "rgba.png")
    assert image.pixels.shape == (4, 4, 3)
    assert torch.allclose(image.pixels, torch.full((4, 4, 3), 200 / 255))
    assert len(image.notices) == 1 and "alpha" in image.notices[0]


def write_png16(path: Path, array: np.ndarray) -> None:
    """A minimal 16-bit PNG writer (Pillow cannot write 16-bit colour)."""
    array = array if array.ndim == 3 else array[..., None]
    height, width, channels = array.shape
    rows = b"".join(b"\x00" + array[y].astype(">u2").tobytes() for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 16, {1: 0, 2: 4, 3: 2, 4: 6}[channels], 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("shape", [(4, 4), (4, 4, 3), (4, 4, 4)])
def test_16bit_png_is_scaled_by_65535(tmp_path, shape):
    array = np.zeros(shape, dtype=np.uint16)
    array[0, 0] = 65535
    array[1, 1] = 32768
    array[2, 2] = 257  # 1/255: an 8-bit reading would lose it
    if len(shape) == 3:
        array[3, 3, 0] = 1000  # channel order
    write_png16(tmp_path / "deep.png", array)
    image = load_image(tmp_path / "deep.png")
    pixels = image.pixels
    if len(shape) == 3:
        assert float(pixels[3, 3, 0]) == pytest.approx(1000 / 65535) and float(pixels[3, 3, 1]) == 0.0
    assert pixels.shape == (4, 4, 1 if len(shape) == 2 else 3)
    assert len(image.notices) == (1 if len(shape) == 3 and shape[2] == 4 else 0)  # alpha dropped
    assert float(pixels[0, 0, 0]) == 1.0
    assert float(pixels[1, 1, 0]) == pytest.approx(32768 / 65535, abs=1e-7)
    assert float(pixels[2, 2, 0]) == pytest.approx(1 / 255, abs=1e-7)


def test_jpeg_reads(tmp_path):
    array = np.full((8, 8, 3), 128, dtype=np.uint8)
    iio.imwrite(tmp_path / "x.jpg", array)
    assert load_image(tmp_path / "x.jpg").pixels.shape == (8, 8, 3)


def test_cmyk_jpeg_is_converted_to_rgb_not_read_as_rgb_plus_alpha(tmp_path):
    from PIL import Image

    red = np.zeros((8, 8, 3), dtype=np.uint8)
    red[..., 0] = 255
    Image.fromarray(red).convert("CMYK").save(tmp_path / "red.jpg")  # C, M, Y, K = 0, 255, 255, 0
    image = load_image(tmp_path / "red.jpg")
    assert image.pixels.shape == (8, 8, 3)
    assert image.pixels[..., 0].min() > 0.9 and image.pixels[..., 1:].max() < 0.1
    assert len(image.notices) == 1 and "CMYK" in image.notices[0]


def test_empty_file_is_a_one_line_error(tmp_path):
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(UsageError, match="empty") as info:
        load_image(tmp_path / "empty.png")
    assert "\n" not in str(info.value)


def test_float_images_are_clipped_to_unit_range():
    pixels, _ = to_unit_float(np.array([[-0.5, 0.5, 0.25], [1.5, 1.0, 0.0], [0.0, 0.0, 2.0]], dtype=np.float32))
    assert pixels[..., 0].tolist() == [[0.0, 0.5, 0.25], [1.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


def test_missing_file_is_a_one_line_error(tmp_path):
    with pytest.raises(UsageError, match="not found") as info:
        load_image(tmp_path / "nope.png")
    assert "\n" not in str(info.value)


def test_unreadable_file_is_a_one_line_error(tmp_path):
    (tmp_path / "bad.png").write_text("this is not an image")
    with pytest.raises(UsageError, match=r"bad.png as an image \(its contents are not an image of") as info:
        load_image(tmp_path / "bad.png")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("shape", [(2, 2, 3), (2, 64, 3), (64, 1)])
def test_an_image_smaller_than_the_ssim_window_is_refused(tmp_path, shape):
    iio.imwrite(tmp_path / "small.png", np.zeros(shape, np.uint8))
    with pytest.raises(UsageError, match="give an image of at least 3x3"):
        load_image(tmp_path / "small.png")


def test_folder_is_not_an_image(tmp_path):
    with pytest.raises(UsageError, match="not a file"):
        load_image(tmp_path)


def test_bundled_default_image_loads_offline():
    image = load_image(None)
    assert image.pixels.shape == (512, 512, 3) and image.name == "astronaut"


def test_downsample_is_the_area_mean():
    pixels = torch.arange(36, dtype=torch.float32).reshape(6, 6, 1)
    out = downsample(pixels, 2)
    assert out.shape == (3, 3, 1)
    assert out[..., 0].tolist() == [[3.5, 5.5, 7.5], [15.5, 17.5, 19.5], [27.5, 29.5, 31.5]]
    assert downsample(pixels, 1) is pixels
    with pytest.raises(UsageError, match="leaves under 3x3 pixels"):
        downsample(pixels, 3)  # 2x2 left: too small for SSIM's window


def test_pixel_coordinates_span_minus_one_to_one_row_major():
    coords = pixel_coordinates(3, 5)
    assert coords.shape == (15, 2)
    assert coords[0].tolist() == [-1.0, -1.0] and coords[-1].tolist() == [1.0, 1.0]
    assert coords[1].tolist() == [-0.5, -1.0]  # x varies fastest
