"""The one image reader: every mode and bit depth mapped to [0, 1] from the range its file stores, or refused in one
line naming the file."""

import struct
import zlib

import numpy as np
import pytest
from PIL import Image

from rff_field.core.errors import UsageError
from rff_field.image.data import load_image

RNG = np.random.default_rng(0)


def write_png16(path, values: np.ndarray) -> None:
    """A 16-bit PNG of ``values`` ([H, W] gray or [H, W, 3] RGB, uint16), written by hand (Pillow writes 16-bit gray
    only)."""
    height, width = values.shape[:2]
    colour = 2 if values.ndim == 3 else 0
    rows = b"".join(b"\0" + row.astype(">u2").tobytes() for row in values.reshape(height, -1))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 16, colour, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) +
                     chunk(b"IEND", b""))  # fmt: skip


def gray16_below_256(path):
    values = RNG.integers(0, 256, (6, 5)).astype(np.uint16)
    write_png16(path, values)
    return values / 65535


def rgb16(path):
    values = RNG.integers(0, 65536, (6, 5, 3)).astype(np.uint16)
    write_png16(path, values)
    return (values >> 8) / 255  # read with 8 bits (a notice says so)


def palette(path):
    index = RNG.integers(0, 4, (6, 5)).astype(np.uint8)
    colours = np.array([[0, 0, 0], [255, 0, 0], [0, 128, 255], [255, 255, 255]], np.uint8)
    image = Image.fromarray(index, mode="P")
    image.putpalette(colours.flatten().tolist())
    image.save(path)
    return colours[index] / 255


def one_bit(path):
    bits = RNG.integers(0, 2, (6, 5)).astype(bool)
    Image.fromarray(bits).save(path)
    return bits.astype(float)


def gray_alpha(path):
    values = RNG.integers(0, 256, (6, 5, 2)).astype(np.uint8)
    Image.fromarray(values, mode="LA").save(path)
    return values[..., 0] / 255


def float_tiff(path):
    values = RNG.random((6, 5)).astype(np.float32)
    Image.fromarray(values).save(path)
    return values


def tiff16(path):
    values = RNG.integers(0, 300, (6, 5)).astype(np.uint16)
    Image.fromarray(values).save(path)
    return values / 65535


def pgm_maxval_1023(path):
    values = RNG.integers(0, 1024, (6, 5))
    path.write_bytes(b"P5 5 6 1023\n" + values.astype(">u2").tobytes())
    return values / 1023


def cmyk_jpeg(path):
    Image.new("CMYK", (5, 6), (0, 255, 0, 0)).save(path, quality=100)
    return np.broadcast_to([1.0, 0.0, 1.0], (6, 5, 3))  # magenta, as Pillow converts CMYK


READABLE = [gray16_below_256, rgb16, palette, one_bit, gray_alpha, float_tiff, tiff16, pgm_maxval_1023, cmyk_jpeg]
SUFFIX = {"float_tiff": ".tif", "tiff16": ".tif", "pgm_maxval_1023": ".pgm", "cmyk_jpeg": ".jpg"}


@pytest.mark.parametrize("write", READABLE, ids=[write.__name__ for write in READABLE])
def test_each_mode_and_bit_depth_is_read_from_its_own_range(write, tmp_path):
    path = tmp_path / f"image{SUFFIX.get(write.__name__, '.png')}"
    expected = write(path)
    pixels, name = load_image(path)
    expected = expected[..., None] if expected.ndim == 2 else expected
    np.testing.assert_allclose(
        pixels.numpy(), expected, atol=1.5 / 255 if "jpeg" in write.__name__ else 1e-5
    )  # 16-bit steps
    assert name == "image"


def nan_float(path):
    Image.fromarray(np.full((6, 5), np.nan, np.float32)).save(path)


def float_above_one(path):
    Image.fromarray(np.full((6, 5), 3.0, np.float32)).save(path)


def int32(path):
    Image.fromarray(np.full((6, 5), 70000, np.int32)).save(path)


def animation(path):
    frames = [Image.new("L", (5, 6), value) for value in (0, 255)]
    frames[0].save(path, save_all=True, append_images=frames[1:])


def truncated(path):
    Image.fromarray(RNG.integers(0, 256, (60, 50, 3)).astype(np.uint8)).save(path)
    path.write_bytes(path.read_bytes()[:200])


REFUSED = [nan_float, float_above_one, int32, animation, truncated]


@pytest.mark.parametrize("write", REFUSED, ids=[write.__name__ for write in REFUSED])
def test_what_cannot_be_mapped_is_refused_in_one_line_naming_the_file(write, tmp_path):
    path = tmp_path / ("bad.gif" if write is animation else "bad.png" if write is truncated else "bad.tif")
    write(path)
    with pytest.raises(UsageError, match="--image .*bad") as error:
        load_image(path)
    assert "\n" not in str(error.value)
