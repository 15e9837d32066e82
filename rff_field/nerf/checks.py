"""Checks of a dataset folder before nerfstudio parses it: a wrong ``--data`` stops with one line naming the file and
field, not a traceback from a data parser or a training that diverges on it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Literal, Optional

import numpy as np
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import CAMERA_MODEL_TO_TYPE, NerfstudioDataParserConfig

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
        images = [_check_transforms(data / f"transforms_{split}.json", ("camera_angle_x",), blender=True)
                  for split in splits]  # fmt: skip
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


def _check_transforms(
    path: Path, intrinsics: tuple[str, ...], downscale: Optional[int] = None, least: int = 1, blender: bool = False
) -> Path:
    """The first image of a transforms file that lists ``least`` frames with rigid poses, sound ``intrinsics`` and
    distortion, and images of one size as nerfstudio's parser names them; else a :class:`UsageError` naming it."""
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
    for key in set(meta) & {*intrinsics, *DISTORTION, "distortion_params", "camera_model", "applied_transform"}:
        _check_camera_field(key, meta[key], f"{key} of {path}")
    names, sizes = [], set()
    for index, frame in enumerate(frames):
        where = f"frame {index} of {path}"
        missing = [key for key in ("file_path", "transform_matrix") if key not in frame]
        missing += [key for key in intrinsics if key not in frame and key not in meta]
        if missing:
            raise UsageError(f"{where} has no {', '.join(missing)}; add it or regenerate the file")
        for key in set(frame) & {*intrinsics, *DISTORTION, "distortion_params", "transform_matrix"}:
            _check_camera_field(key, frame[key], f"{key} of {where}")
        if not isinstance(frame["file_path"], str):
            raise UsageError(f"file_path of {where} is {frame['file_path']!r}, not a file name")
        if blender:
            name = Path(frame["file_path"].replace("./", "") + ".png")
        else:
            name = Path(frame["file_path"]) if not downscale or downscale == 1 else Path(f"images_{downscale}") / \
                Path(frame["file_path"]).name  # fmt: skip
        names.append(name)
        if "w" in intrinsics:
            sizes.add((frame.get("w", meta.get("w")), frame.get("h", meta.get("h"))))
    first, (width, height) = _check_images(path, [path.parent / name for name in names])
    factor = downscale or 1
    slack = 1 if factor > 1 else 0  # nerfstudio rounds the scaled sizes down
    for w, h in sizes:
        if abs(w / factor - width) > slack or abs(h / factor - height) > slack:
            raise UsageError(f"{path} gives w {w:g} and h {h:g}, but its images are {width}x{height}"
                             f"{f' at downscale {factor}' if factor > 1 else ''}; fix w and h")  # fmt: skip
    return first


POSE_TOLERANCE = 1e-2
"""How far a pose's rotation may be from orthonormal, and its last row from ``0 0 0 1``."""
DISTORTION = ("k1", "k2", "k3", "k4", "p1", "p2")


def _check_camera_field(key: str, value: object, where: str) -> None:
    """Raise :class:`UsageError` naming ``where`` for a camera field nerfstudio would misread or fail on."""
    if key == "camera_model":
        if not isinstance(value, str) or value not in CAMERA_MODEL_TO_TYPE:
            raise UsageError(f"{where} is {value!r}; nerfstudio knows {', '.join(CAMERA_MODEL_TO_TYPE)}")
        return
    shape = {"transform_matrix": (4, 4), "applied_transform": (3, 4), "distortion_params": (6,)}.get(key, ())
    try:
        array = np.asarray(value, dtype=np.float64)
        assert not isinstance(value, (bool, str)) and array.shape == shape
    except (TypeError, ValueError, AssertionError):
        what = f"a {'x'.join(map(str, shape))} array of numbers" if shape else "a number"
        raise UsageError(f"{where} is {value!r}, not {what}") from None
    if not np.isfinite(array).all():
        raise UsageError(f"{where} holds non-finite values ({value!r})")
    if key == "transform_matrix":
        rotation = array[:3, :3]
        if (np.abs(array[3] - [0, 0, 0, 1]).max() > POSE_TOLERANCE or np.linalg.det(rotation) <= 0
                or np.abs(rotation.T @ rotation - np.eye(3)).max() > POSE_TOLERANCE):  # fmt: skip
            raise UsageError(f"{where} is not a rigid camera-to-world transform (a rotation of determinant 1 and a "
                             f"translation, last row 0 0 0 1): {array.round(4).tolist()}")  # fmt: skip
    elif key in ("fl_x", "fl_y", "cx", "cy", "w", "h", "camera_angle_x") and not (
        array > 0 and (key != "camera_angle_x" or array < math.pi) and (key not in ("w", "h") or array % 1 == 0)
    ):
        whole = key in ("w", "h")
        limits = "in (0, pi)" if key == "camera_angle_x" else "a positive whole number" if whole else "positive"
        raise UsageError(f"{where} is {value!r}; it must be {limits}")


def _check_images(transforms: Path, images: list[Path]) -> tuple[Path, tuple[int, int]]:
    """The first image and the size all share; a :class:`UsageError` for a missing, unreadable or odd-sized image, or a
    mode nerfstudio reads wrongly (it takes 8-bit L, RGB or RGBA)."""
    from PIL import Image

    sizes = {}
    for image in images:
        try:
            with Image.open(image) as opened:  # reads the header only
                sizes[image], mode = opened.size, opened.mode
        except FileNotFoundError:
            raise UsageError(
                f"{image}, listed in {transforms.name}, is missing; restore it or drop its frame"
            ) from None
        except Exception:  # Pillow raises many types for damaged headers
            raise UsageError(f"{image}, listed in {transforms.name}, is not a readable image; replace it") from None
        if mode not in ("L", "RGB", "RGBA"):
            raise UsageError(f"{image} is a {mode} image, which nerfstudio reads wrongly; convert it to 8-bit RGB or "
                             "RGBA")  # fmt: skip
        if sizes[image] != sizes[images[0]]:
            raise UsageError(f"{image} is {sizes[image]} pixels but {images[0].name} is {sizes[images[0]]}: the "
                             "images of a dataset must have one size")  # fmt: skip
    return images[0], sizes[images[0]]


def check_scaled_size(image: Path, scale: float, option: str) -> None:
    """Raise :class:`UsageError` unless ``image`` scaled by ``scale`` is large enough to evaluate and fits in memory."""
    from PIL import Image

    from rff_field.common.machine import check_memory

    with Image.open(image) as opened:
        width, height = opened.size
    if min(width * scale, height * scale) < MIN_EVAL_IMAGE_SIDE:
        raise UsageError(f"{option} {scale:g} makes the {width}x{height} images smaller than {MIN_EVAL_IMAGE_SIDE} "
                         "pixels a side, too small to evaluate; raise it")  # fmt: skip
    check_memory(option, scale, lambda factor: 16 * width * height * factor**2)


PROPOSAL_SAMPLE_BYTES = 256
"""Memory a sample of nerfacto's proposal networks takes (small hash grids and MLPs)."""


def check_model_memory(pipeline: Any, device: str) -> None:
    """Raise :class:`UsageError` naming the option (the embedding's size, or rays per batch) whose memory cannot fit on
    ``device``: the filter with Adam's state, and a low estimate of the samples' activations."""
    from rff_field.common.machine import TRAINING_BYTES_PER_PARAMETER, check_memory
    from rff_field.core.embedding import DEFAULT_NUM_FREQUENCIES

    model, datamanager = pipeline.model, pipeline.datamanager
    width = max(getattr(model, "base_mlp_layer_width", 0), getattr(model, "hidden_dim", 0), 1)
    layers = max(getattr(model, "base_mlp_num_layers", 0), getattr(model, "base_num_layers", 0), 1)
    embedding, channels = getattr(model, "embedding", None), 0
    if embedding is not None:
        count = embedding.num_frequencies or DEFAULT_NUM_FREQUENCIES.get(embedding.pe_bands, 10)
        filter_layers = embedding.filter_layers if embedding.filtered else 0

        def embedding_bytes(count: int, filter_layers: int) -> int:
            channels = 2 * count * (1 if embedding.encoding == "rff" else 3) + 3
            return (4 + TRAINING_BYTES_PER_PARAMETER) * (filter_layers * channels**2 + channels * width)

        if embedding.num_frequencies is not None:
            option = "--pipeline.model.embedding.num-frequencies"
            check_memory(option, count, lambda n: embedding_bytes(n, filter_layers), device)
        check_memory("--pipeline.model.embedding.filter-layers", filter_layers, lambda n: embedding_bytes(count, n),
                     device)  # fmt: skip
        channels = 2 * count * 3 * (filter_layers + 2)
    per_sample = 4 * (width * layers + channels)
    proposals = sum(getattr(model, "num_proposal_samples_per_ray", ()) or ())
    counts = {
        f"--pipeline.model.{name.replace('_', '-')}": getattr(model, name)
        for name in ("num_coarse_samples", "num_importance_samples", "num_nerf_samples_per_ray")
        if hasattr(model, name)
    }
    for name, kept in (("train_num_rays_per_batch", 3), ("eval_num_rays_per_batch", 1)):
        rays = f"--pipeline.datamanager.{name.replace('_', '-')}"
        sizes = {**counts, rays: getattr(datamanager, name)}

        def needed(option: str, value: int, sizes=sizes, kept=kept, rays=rays) -> int:
            sizes = {**sizes, option: value}
            return (
                kept * sizes.pop(rays) * (PROPOSAL_SAMPLE_BYTES * proposals + max(sum(sizes.values()), 1) * per_sample)
            )

        for option in sorted(sizes, key=lambda option: needed(option, 1)):  # the one whose reduction saves most
            check_memory(option, sizes[option], lambda value, option=option: needed(option, value), device)
