"""Checks of a dataset folder before nerfstudio parses it: a wrong ``--data`` stops with one line that says what is
wrong and what to do, instead of a traceback from inside a data parser."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Literal, Optional

from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig

from rff_field.core.errors import UsageError

TestMode = Literal["test", "val", "inference"]
MIN_EVAL_IMAGE_SIDE = 8
"""The smallest image side evaluation takes (SSIM's 11-pixel window with a padding of 5)."""


def dataset_path(pipeline: object) -> Optional[Path]:
    """The dataset a pipeline config reads: its data manager's ``data`` (``--data``), else its parser's."""
    datamanager = getattr(pipeline, "datamanager", None)
    data = getattr(datamanager, "data", None)
    return data if data is not None else getattr(getattr(datamanager, "dataparser", None), "data", None)


def check_dataset(
    dataparser: object, data: Optional[Path], test_mode: TestMode, method: Optional[str]
) -> Optional[Path]:
    """Check ``data`` for the parsers whose layout is known; returns its first image (None for other parsers)."""
    if data is None:
        return None
    data = Path(data)
    if not data.exists():
        raise UsageError(f"--data {data} does not exist; pass a dataset folder (rff-scene writes one)")
    command = f"ns-train {method or '<method>'} [OPTIONS] {{}} --data {data}"
    if isinstance(dataparser, BlenderDataParserConfig):
        if (data / "transforms.json").exists() and not (data / "transforms_train.json").exists():
            raise UsageError(
                f"{data} is a nerfstudio-data capture (transforms.json); run {command.format('nerfstudio-data')}"
            )
        splits = ["train"] + (["val" if test_mode == "val" else "test"] if test_mode != "inference" else [])
        images = [_check_transforms(data / f"transforms_{split}.json", ("camera_angle_x",)) for split in splits]
        return images[0]
    if isinstance(dataparser, NerfstudioDataParserConfig):
        transforms = data if data.suffix == ".json" else data / "transforms.json"
        if not transforms.exists() and (data / "transforms_train.json").exists():
            raise UsageError(
                f"{data} is a Blender-format scene (transforms_train.json); run {command.format('blender-data')}"
            )
        first = _check_transforms(transforms, ("fl_x", "fl_y", "cx", "cy", "w", "h"), dataparser.downscale_factor, 2)
        frames = len(json.loads(transforms.read_text())["frames"])
        if dataparser.eval_mode == "fraction" and frames - math.ceil(frames * dataparser.train_split_fraction) < 1:
            raise UsageError(f"--train-split-fraction {dataparser.train_split_fraction:g} leaves none of the {frames} "
                             f"frames of {transforms} to evaluate; lower it")  # fmt: skip
        return first
    return None


def _check_transforms(path: Path, intrinsics: tuple[str, ...], downscale: Optional[int] = None, least: int = 1) -> Path:
    """Raise :class:`UsageError` unless ``path`` lists at least ``least`` frames with a pose and an image file of
    one size (``images_<downscale>/`` as nerfstudio reads them), and the camera ``intrinsics``; returns the first
    image."""
    if not path.is_file():
        raise UsageError(f"{path} does not exist; a dataset in this layout needs it")
    try:
        meta = json.loads(path.read_text())
        frames = meta["frames"]
        assert isinstance(frames, list) and all(isinstance(frame, dict) for frame in frames)
    except (ValueError, KeyError, TypeError, AssertionError, UnicodeDecodeError):
        raise UsageError(
            f"{path} is not a transforms file (JSON with a list of frames); fix or regenerate it"
        ) from None
    if len(frames) < least:
        raise UsageError(f"{path} lists {len(frames)} frame(s); training needs at least {least}")
    names = []
    for index, frame in enumerate(frames):
        missing = [key for key in ("file_path", "transform_matrix") if key not in frame]
        missing += [key for key in intrinsics if key not in frame and key not in meta]
        if missing:
            raise UsageError(f"frame {index} of {path} has no {', '.join(missing)}; add it or regenerate the file")
        name = Path(str(frame["file_path"]))
        if downscale is not None and downscale > 1:
            name = Path(f"images_{downscale}") / name.name
        names.append(name if name.suffix else name.with_suffix(".png"))  # Blender scenes name their PNGs bare
    return _check_images(path, [path.parent / name for name in names])


def _check_images(transforms: Path, images: list[Path]) -> Path:
    from PIL import Image, UnidentifiedImageError

    sizes = {}
    for image in images:
        try:
            with Image.open(image) as opened:  # reads the header only
                sizes[image] = opened.size
        except FileNotFoundError:
            raise UsageError(
                f"{image}, listed in {transforms.name}, is missing; restore it or drop its frame"
            ) from None
        except (UnidentifiedImageError, OSError):
            raise UsageError(f"{image}, listed in {transforms.name}, is not a readable image; replace it") from None
        if sizes[image] != sizes[images[0]]:
            raise UsageError(f"{image} is {sizes[image]} pixels but {images[0].name} is {sizes[images[0]]}: the "
                             "images of a dataset must have one size")  # fmt: skip
    return images[0]


def check_scaled_size(image: Path, scale: float, option: str) -> None:
    """Raise :class:`UsageError` unless ``image`` scaled by ``scale`` is large enough to evaluate."""
    from PIL import Image

    with Image.open(image) as opened:
        width, height = opened.size
    if min(int(width * scale), int(height * scale)) < MIN_EVAL_IMAGE_SIDE:
        raise UsageError(f"{option} {scale:g} makes the {width}x{height} images smaller than {MIN_EVAL_IMAGE_SIDE} "
                         "pixels a side, too small to evaluate; raise it")  # fmt: skip
