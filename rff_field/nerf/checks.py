"""Checks of user input (model options, dataset folder) that turn mistakes into one clear sentence.

They run before nerfstudio builds anything, so a wrong ``--data`` or option fails at once with a message that
says what is wrong and what to do, instead of a traceback from deep inside a data parser.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Optional

import numpy as np
from nerfstudio.data.dataparsers.base_dataparser import DataParserConfig
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig
from nerfstudio.models.nerfacto import NerfactoModelConfig

from rff_field.core.errors import UsageError, check_fields
from rff_field.nerf.filtered_model import MODEL_OPTION_PREFIX

if TYPE_CHECKING:
    from rff_field.nerf.model import RFFNeRFModelConfig
    from rff_field.nerf.nerfacto_model import RFFNerfactoModelConfig

TestMode = Literal["test", "val", "inference"]

HASH_GRID_OPTIONS = ("num_levels", "base_res", "max_res", "log2_hashmap_size", "features_per_level")
"""nerfacto's options of its main field's hash grid, which rff-nerfacto's Fourier field does not have."""


def check_model_config(config: "RFFNeRFModelConfig") -> None:
    """Raise :class:`UsageError` for options the model cannot be built with."""
    config.check_embedding()
    check_fields(
        config,
        positive_int=(
            "num_coarse_samples", "num_importance_samples", "base_mlp_num_layers", "base_mlp_layer_width",
            "head_mlp_num_layers", "head_mlp_layer_width", "direction_num_frequencies", "eval_num_rays_per_chunk",
        ),
        prefix=MODEL_OPTION_PREFIX,
    )  # fmt: skip
    bad_skips = [s for s in config.skip_connections if not 0 < s < config.base_mlp_num_layers - 1]
    if bad_skips:
        raise UsageError(
            f"--pipeline.model.skip-connections {bad_skips} must lie in 1..{config.base_mlp_num_layers - 2} "
            f"(the density MLP has {config.base_mlp_num_layers} layers)"
        )
    if config.enable_collider:
        params = config.collider_params or {}
        near, far = params.get("near_plane"), params.get("far_plane")
        if near is None or far is None or not 0 <= near < far:
            raise UsageError(f"--pipeline.model.collider-params needs 0 <= near_plane < far_plane, got {dict(params)}")


def check_nerfacto_config(config: "RFFNerfactoModelConfig") -> None:
    """Raise :class:`UsageError` for options ``rff-nerfacto`` cannot be built with."""
    config.check_embedding()
    nerfacto_defaults = NerfactoModelConfig()
    for name in HASH_GRID_OPTIONS:
        if getattr(config, name) != getattr(nerfacto_defaults, name):
            raise UsageError(
                f"{MODEL_OPTION_PREFIX}{name.replace('_', '-')} does not apply to rff-nerfacto, whose main field is a "
                "filtered Fourier field, not a hash grid; set its detail with --pipeline.model.num-frequencies "
                "(or pe-scale), and the proposal networks' grids with --pipeline.model.proposal-net-args-list"
            )
    check_fields(
        config,
        positive_int=(
            "hidden_dim", "base_num_layers", "hidden_dim_color", "num_nerf_samples_per_ray",
            "num_proposal_iterations", "eval_num_rays_per_chunk", "proposal_weights_anneal_max_num_iters",
        ),
        positive=("far_plane", "average_init_density"),
        non_negative=[name for name in ("interlevel_loss_mult", "distortion_loss_mult", "orientation_loss_mult",
                                        "pred_normal_loss_mult") if hasattr(config, name)],
        prefix=MODEL_OPTION_PREFIX,
    )  # fmt: skip
    if config.use_appearance_embedding:
        check_fields(config, positive_int=("appearance_embed_dim",), prefix=MODEL_OPTION_PREFIX)
    check_fields(config, non_negative_int=("coarse_sampling_steps",), prefix=MODEL_OPTION_PREFIX)
    proposal_counts = ["num_proposal_samples_per_ray"]
    if config.coarse_sampling_steps != 0:  # None: chosen by the data, perhaps a coarse start
        check_fields(config, positive_int=("coarse_nerf_samples_per_ray",), prefix=MODEL_OPTION_PREFIX)
        proposal_counts.append("coarse_proposal_samples_per_ray")
    for name in proposal_counts:
        samples = getattr(config, name)
        if len(samples) < config.num_proposal_iterations or not all(n > 0 for n in samples):
            raise UsageError(
                f"{MODEL_OPTION_PREFIX}{name.replace('_', '-')} {' '.join(map(str, samples))} needs a positive count "
                f"for each of the {config.num_proposal_iterations} proposal iterations"
            )
    if not 0 <= config.near_plane < config.far_plane:
        raise UsageError(
            f"--pipeline.model.near-plane must lie in [0, far-plane), got {config.near_plane} (far {config.far_plane})"
        )


def check_optimizers(optimizers: dict) -> None:
    """Raise :class:`UsageError` for an optimizer group whose rate, ``eps``, weight decay or final scheduled rate
    torch would refuse (or reach as a math error) once training starts."""
    for name, group in optimizers.items():
        if not isinstance(group, dict):
            continue
        optimizer, scheduler = group.get("optimizer"), group.get("scheduler")
        option = name.replace("_", "-")  # as ns-train spells the group
        lr = getattr(optimizer, "lr", None)
        if lr is not None and not (isinstance(lr, (int, float)) and math.isfinite(lr) and lr > 0):
            raise UsageError(f"--optimizers.{option}.optimizer.lr must be a positive finite number, got {lr}")
        if optimizer is not None:
            check_fields(optimizer, non_negative=("eps", "weight_decay"), prefix=f"--optimizers.{option}.optimizer.")
        if scheduler is not None:
            check_fields(scheduler, positive=("lr_final",), prefix=f"--optimizers.{option}.scheduler.")


def check_seed(seed: int, option: str) -> None:
    """Raise :class:`UsageError` for a seed numpy's legacy seeding (nerfstudio's ``set_random_seed``) refuses."""
    if not 0 <= seed < 2**32:
        raise UsageError(f"{option} must be between 0 and 2**32 - 1 (numpy's seeds), got {seed}")


def check_datamanager(datamanager: object) -> None:
    """Raise :class:`UsageError` for a ray batch size that gives no rays."""
    names = [n for n in ("train_num_rays_per_batch", "eval_num_rays_per_batch") if hasattr(datamanager, n)]
    check_fields(datamanager, positive_int=names, prefix="--pipeline.datamanager.")


def _needed_split(test_mode: TestMode) -> str:
    return "val" if test_mode == "val" else "test"


def _check_transforms(path: Path, what: str, min_frames: int = 1) -> dict:
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise UsageError(f"{path} is not valid JSON ({err.msg} at line {err.lineno}); fix or regenerate it") from None
    except (UnicodeDecodeError, OSError) as err:
        raise UsageError(f"could not read {path} as JSON text ({err}); fix or regenerate it") from None
    frames = meta.get("frames") if isinstance(meta, dict) else None
    if not frames or len(frames) < min_frames:
        listed = f"only {len(frames)} frame" if frames else "no frames"
        raise UsageError(f"{path} lists {listed}; {what} needs at least {min_frames} image(s)")
    return meta


def _is_pose(matrix: object) -> bool:
    try:
        pose = np.asarray(matrix, dtype=float)
    except (TypeError, ValueError):
        return False
    return pose.shape in ((4, 4), (3, 4)) and bool(np.isfinite(pose).all())


def _check_frames(meta: dict, transforms: Path, intrinsics: tuple[str, ...] = ()) -> None:
    """Raise :class:`UsageError` naming the first frame without a file path or a pose, or without one of the camera
    ``intrinsics`` (which nerfstudio also reads from the top level of the file, for every frame)."""
    for index, frame in enumerate(meta["frames"]):
        frame = frame if isinstance(frame, dict) else {}
        missing = [key for key in ("file_path", "transform_matrix") if key not in frame]
        if missing:
            pronoun = "it" if len(missing) == 1 else "them"
            raise UsageError(f"frame {index} of {transforms} has no {', '.join(missing)}; add {pronoun} to every frame")
        if not _is_pose(frame["transform_matrix"]):
            raise UsageError(
                f"frame {index} of {transforms} has a transform_matrix that is not a 4x4 (or 3x4) matrix of finite "
                "numbers; fix or regenerate the file"
            )
        missing = [key for key in intrinsics if key not in meta and key not in frame]
        if missing:
            raise UsageError(
                f"frame {index} of {transforms} has no {', '.join(missing)}, nor has the file's top level; give the "
                f"camera intrinsics {', '.join(intrinsics)} once at the top level or in every frame"
            )


def _check_images(
    data: Path, names: list[str], transforms: Path, what: str = "image", remedy: Optional[str] = None
) -> None:
    """Raise :class:`UsageError` naming the first of the images ``names`` (relative to ``data``) that is missing or
    unreadable, or that differs in size from the first (nerfstudio's data manager stacks images of one size).
    ``what`` names the files in the message, ``remedy`` replaces the advice for missing ones."""
    from PIL import Image, UnidentifiedImageError

    missing = [name for name in names if not (data / name).exists()]
    if missing:
        remedy = remedy or f"restore them or remove their frames from {transforms.name}"
        raise UsageError(
            f"{len(missing)} {what}(s) listed in {transforms.name} are missing under {data}, e.g. {missing[0]}; "
            f"{remedy}"
        )
    sizes = {}
    for name in names:
        try:
            with Image.open(data / name) as opened:  # reads the header only
                sizes[name] = opened.size
        except (UnidentifiedImageError, OSError) as err:
            reason = "not an image file" if isinstance(err, UnidentifiedImageError) else type(err).__name__
            raise UsageError(
                f"{data / name}, listed in {transforms.name}, cannot be read ({reason}); replace it or remove its frame"
            ) from None
        first, (width, height) = names[0], sizes[name]
        if sizes[name] != sizes[first]:
            raise UsageError(
                f"{data / name} is {width}x{height} but {first} is {sizes[first][0]}x{sizes[first][1]}: the "
                f"{what}s of a dataset must have one size; resize them to one or remove the odd frames"
            )


def _train_command(method: Optional[str], dataparser: str, data: Path) -> str:
    """How to train ``method`` on ``data`` with the data parser ``dataparser`` (a subcommand after the options)."""
    return f"ns-train {method or '<method>'} ... {dataparser} --data {shlex.quote(str(data))}"


def check_blender_dataset(data: Path, test_mode: TestMode = "val", method: Optional[str] = None) -> Path:
    """Raise :class:`UsageError` unless ``data`` is a Blender-format scene with the splits ``test_mode`` reads
    (``method``: the method being trained, for the hint on the subcommand of another layout)."""
    data = Path(data)
    if data.is_file():
        raise UsageError(f"--data {data} is a file; pass the folder that holds it")
    if not data.is_dir():
        raise UsageError(
            f"dataset folder {data} does not exist; pass --data to a Blender-format scene "
            "(transforms_train.json, transforms_val.json, transforms_test.json) or run rff-demo to generate one"
        )
    if not (data / "transforms_train.json").exists():
        if (data / "transforms.json").exists():
            raise UsageError(
                f"{data} holds transforms.json, a nerfstudio dataset; add the subcommand 'nerfstudio-data' after "
                f"the options: {_train_command(method, 'nerfstudio-data', data)}"
            )
        raise UsageError(
            f"{data} has no transforms_train.json: not a Blender-format scene; pass --data to a folder with "
            "transforms_train.json, transforms_val.json and transforms_test.json"
        )
    first = None
    for split in ("train", _needed_split(test_mode)):
        transforms = data / f"transforms_{split}.json"
        if not transforms.exists():
            purpose = "evaluation during training" if split == "val" else "evaluation and viewing"
            raise UsageError(f"{data} has no {transforms.name} (the '{split}' split, needed for {purpose}); add it")
        meta = _check_transforms(transforms, f"the '{split}' split")
        if "camera_angle_x" not in meta:
            raise UsageError(f"{transforms} has no camera_angle_x (the horizontal field of view); add it")
        _check_frames(meta, transforms)
        names = [str(frame["file_path"]).replace("./", "") + ".png" for frame in meta["frames"]]
        _check_images(data, names, transforms)
        first = first or data / names[0]
    return first


def check_nerfstudio_dataset(
    data: Path,
    downscale_factor: Optional[int] = None,
    method: Optional[str] = None,
    train_split_fraction: Optional[float] = None,
) -> Path:
    """Raise :class:`UsageError` unless ``data`` is a nerfstudio dataset (a folder with transforms.json, or it) with
    at least 2 frames whose images and masks exist, can be read and have one size (in ``images_<downscale_factor>/``
    for a factor above 1, as nerfstudio reads them; ``method``: the method being trained, for the hint on the
    subcommand of another layout), and, given the parser's ``train_split_fraction``, a view left to evaluate."""
    data = Path(data)
    if not data.exists():
        raise UsageError(f"dataset {data} does not exist; pass --data to a folder holding transforms.json")
    transforms = data if data.suffix == ".json" else data / "transforms.json"
    if not transforms.exists():
        if (data / "transforms_train.json").exists():
            raise UsageError(
                f"{data} holds transforms_train.json, a Blender-format scene; use the subcommand 'blender-data' "
                f"after the options: {_train_command(method, 'blender-data', data)}"
            )
        raise UsageError(f"{data} has no transforms.json: not a nerfstudio dataset (see ns-process-data)")
    # one frame would fail in nerfstudio's parser with a division by zero
    meta = _check_transforms(transforms, "nerfstudio-data (it splits them into training and evaluation views)", 2)
    _check_frames(meta, transforms, ("fl_x", "fl_y", "cx", "cy", "w", "h"))
    scaled = downscale_factor is not None and downscale_factor > 1

    def located(key: str, prefix: str) -> list[str]:  # where nerfstudio reads each frame's file
        paths = [Path(str(frame[key])) for frame in meta["frames"] if isinstance(frame, dict) and key in frame]
        return [f"{prefix}_{downscale_factor}/{path.name}" if scaled else str(path) for path in paths]

    def scaled_remedy(prefix: str) -> str:
        return (f"--downscale-factor {downscale_factor} reads {prefix}_{downscale_factor}/: make it (ns-process-data "
                f"writes {prefix}_2, _4 and _8) or leave out --downscale-factor")  # fmt: skip

    names = located("file_path", "images")
    _check_images(transforms.parent, names, transforms, remedy=scaled_remedy("images") if scaled else None)
    masks = located("mask_path", "masks")
    if masks:
        remedy = scaled_remedy("masks") if scaled else "restore them or remove mask_path from their frames"
        _check_images(transforms.parent, masks, transforms, "mask", remedy)
    if train_split_fraction is not None:
        frames = len(meta["frames"])
        if frames - math.ceil(frames * train_split_fraction) < 1:
            raise UsageError(
                f"{transforms} lists {frames} frames, and --train-split-fraction {train_split_fraction:g} puts all "
                f"of them in training: no view is left to evaluate; give more frames or a lower fraction "
                f"({_train_command(method, 'nerfstudio-data --train-split-fraction 0.5', data)})"
            )
    return transforms.parent / names[0]


def check_dataset(
    dataparser: DataParserConfig, test_mode: TestMode = "val", data: Optional[Path] = None, method: Optional[str] = None
) -> None:
    """Check the dataset folder (``data``, else the parser's own ``data``) for the parsers whose layout is known
    (``method``: the method being trained, named in the hints)."""
    data = data if data is not None else getattr(dataparser, "data", None)
    if data is None:
        return None
    if isinstance(dataparser, BlenderDataParserConfig):
        return check_blender_dataset(Path(data), test_mode, method)
    if isinstance(dataparser, NerfstudioDataParserConfig):
        fraction = dataparser.train_split_fraction if dataparser.eval_mode == "fraction" else None
        return check_nerfstudio_dataset(Path(data), dataparser.downscale_factor, method, fraction)
    if not Path(data).exists():
        raise UsageError(f"dataset {data} does not exist; pass --data to an existing dataset")
    return None


MIN_EVAL_IMAGE_SIDE = 8
"""The smallest image side evaluation takes (SSIM's window, 11 pixels with a padding of 5, needs over 5)."""


def check_scaled_image_size(image: Path, scale: float, option: str) -> None:
    """Raise :class:`UsageError` when ``image`` (a dataset's first image), scaled by ``scale`` as the data manager
    scales the cameras, is too small to evaluate."""
    from PIL import Image

    try:
        with Image.open(image) as opened:
            width, height = opened.size
    except OSError:
        return  # unreadable images are the data parser's to report
    scaled = (int(width * scale), int(height * scale))
    if min(scaled) < MIN_EVAL_IMAGE_SIDE:
        raise UsageError(
            f"the images of the dataset are {width}x{height}, {scaled[0]}x{scaled[1]} at {option} {scale:g}: "
            f"evaluation (SSIM) needs at least {MIN_EVAL_IMAGE_SIDE} pixels a side; raise {option} or use larger images"
        )


def dataset_path(config: object) -> Optional[Path]:
    """The dataset path of a pipeline config: the data manager's ``data`` (``--data``), else its parser's."""
    datamanager = getattr(config, "datamanager", None)
    data = getattr(datamanager, "data", None)
    return data if data is not None else getattr(getattr(datamanager, "dataparser", None), "data", None)


def check_run_dataset_path(data: Optional[Path], config_path: object = "the run's config.yml") -> None:
    """Raise :class:`UsageError` when the dataset path that a trained run's ``config.yml`` holds does not exist from
    here (ns-eval, rff-export-mesh and the like read it from there: they have no ``--data`` to fix it)."""
    if data is None or Path(data).exists():
        return
    if not Path(data).is_absolute():
        raise UsageError(
            f"{config_path} holds the relative data path {data}, resolved from the current folder {Path.cwd()}, "
            f"where it does not exist; run from the folder where the run was trained (or edit data in config.yml)"
        )
    raise UsageError(
        f"{config_path} holds the data path {data}, which does not exist; put the dataset back there "
        "(or edit data in config.yml)"
    )
