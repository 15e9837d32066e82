"""Registration with ns-train, and bad input (datasets, options) turned into one clear line."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import imageio.v3 as iio
import numpy as np
import pytest
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig

from rff_field.core.optim import LineSearchConfig
from rff_field.nerf.checks import (
    UsageError,
    check_blender_dataset,
    check_dataset,
    check_model_config,
    check_nerfacto_config,
    check_optimizers,
)
from rff_field.nerf.model import RFFNeRFModelConfig
from rff_field.nerf.nerfacto_model import RFFNerfactoModelConfig
from rff_field.nerf.pipeline import object_in_void_sampling_notice
from rff_field.nerf.synthetic_scene import CaptureSpec, SceneSpec, write_blender_scene, write_nerfstudio_capture
from tests.nerf.environment import OUR_METHODS, ns_environment

BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    spec = SceneSpec(image_size=8, num_train=2, num_val=1, num_test=1, supersample=1)
    return write_blender_scene(tmp_path_factory.mktemp("inputs") / "scene", spec)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    spec = CaptureSpec(image_size=8, num_views=10, supersample=1)  # nerfstudio-data evaluates one in ten
    return write_nerfstudio_capture(tmp_path_factory.mktemp("inputs") / "capture", spec)


def _copy(scene: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(scene, tmp_path / "copy"))


def _edit_frames(transforms: Path, edit) -> None:
    meta = json.loads(transforms.read_text())
    edit(meta)
    transforms.write_text(json.dumps(meta))


def _keep_frames(capture: Path, count: int) -> None:
    _edit_frames(capture / "transforms.json", lambda meta: meta.update(frames=meta["frames"][:count]))


def test_methods_are_registered(monkeypatch):
    from nerfstudio.plugins.registry import discover_methods

    # the entry points of an installed package, or nerfstudio's variable where it is not (re)installed yet
    monkeypatch.setenv("NERFSTUDIO_METHOD_CONFIGS", OUR_METHODS)
    methods, descriptions = discover_methods()
    assert {"rff-nerf", "rff-nerf-lite", "rff-nerfacto", "rff-nerfacto-lite"} <= set(methods)
    assert methods["rff-nerf"].pipeline.model.base_mlp_num_layers == 8
    assert methods["rff-nerf"].pipeline.model.num_importance_samples == 128
    assert methods["rff-nerf-lite"].pipeline.model.base_mlp_layer_width < 256
    for name in ("rff-nerf", "rff-nerf-lite", "rff-nerfacto", "rff-nerfacto-lite"):
        assert methods[name].optimizers["filter"]["scheduler"] is None
        assert "filter" in descriptions[name]
    assert methods["rff-nerfacto"].mixed_precision and methods["rff-nerfacto"].pipeline.model.implementation == "tcnn"
    assert methods["rff-nerfacto-lite"].pipeline.model.implementation == "torch"
    for name in ("rff-nerfacto", "rff-nerfacto-lite"):
        assert isinstance(methods[name].pipeline.datamanager.dataparser, NerfstudioDataParserConfig)
        assert methods[name].pipeline.model.predict_normals


def test_listed_by_ns_train_help():
    out = subprocess.run(
        [str(BIN / "ns-train"), "--help"], capture_output=True, text=True, timeout=300, env=ns_environment()
    )
    assert out.returncode == 0, out.stderr[-2000:]
    for name in ("rff-nerf ", "rff-nerf-lite", "rff-nerfacto ", "rff-nerfacto-lite"):
        assert name in out.stdout


def test_every_command_spells_the_line_search_options_alike():
    """rff-image, rff-sdf and both NeRF methods nest the one LineSearchConfig, so their options are the same."""
    import dataclasses
    import typing

    from rff_field.core.optim import LineSearchConfig
    from rff_field.image.fit import FitConfig
    from rff_field.sdf.fit import SDFTrainConfig

    for config in (FitConfig, SDFTrainConfig, RFFNeRFModelConfig, RFFNerfactoModelConfig):
        assert typing.get_type_hints(config)["line_search"] is LineSearchConfig, config
    out = subprocess.run([str(BIN / "ns-train"), "rff-nerfacto-lite", "--help"], capture_output=True, text=True,
                         timeout=300, env=ns_environment())  # fmt: skip
    for field in dataclasses.fields(LineSearchConfig):
        assert f"--pipeline.model.line-search.{field.name.replace('_', '-')}" in out.stdout


def test_valid_scene_passes(scene):
    for mode in ("val", "test", "inference"):
        check_blender_dataset(scene, mode)
    check_dataset(BlenderDataParserConfig(data=scene), "val")


def test_missing_folder_and_missing_transforms(scene, tmp_path):
    with pytest.raises(UsageError, match="does not exist.*rff-demo"):
        check_blender_dataset(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(UsageError, match="no transforms_train.json: not a Blender-format scene"):
        check_blender_dataset(tmp_path / "empty")
    with pytest.raises(UsageError, match="transforms_train.json is a file; pass the folder that holds it"):
        check_blender_dataset(scene / "transforms_train.json")


def test_missing_split(scene, tmp_path):
    data = _copy(scene, tmp_path)
    (data / "transforms_val.json").unlink()
    with pytest.raises(UsageError, match=r"no transforms_val.json \(the 'val' split"):
        check_blender_dataset(data, "val")
    check_blender_dataset(data, "test")  # evaluation on the test split does not need it
    (data / "transforms_test.json").unlink()
    with pytest.raises(UsageError, match="no transforms_test.json"):
        check_blender_dataset(data, "inference")


def test_broken_json_missing_images_and_fov(scene, tmp_path):
    data = _copy(scene, tmp_path)
    (data / "transforms_test.json").write_text("{ not json")
    with pytest.raises(UsageError, match="not valid JSON"):
        check_blender_dataset(data, "test")
    (data / "transforms_test.json").write_bytes(b'{"frames": "\xff\xfe"}')  # not UTF-8
    with pytest.raises(UsageError, match="could not read .*transforms_test.json as JSON text"):
        check_blender_dataset(data, "test")
    (data / "train" / "r_1.png").unlink()
    with pytest.raises(UsageError, match=r"1 image\(s\) listed in transforms_train.json are missing"):
        check_blender_dataset(data, "val")
    meta = json.loads((data / "transforms_val.json").read_text())
    (data / "train" / "r_1.png").write_bytes((data / "train" / "r_0.png").read_bytes())
    del meta["camera_angle_x"]
    (data / "transforms_val.json").write_text(json.dumps(meta))
    with pytest.raises(UsageError, match="no camera_angle_x"):
        check_blender_dataset(data, "val")


def test_wrong_parser_for_the_layout(scene, capture):
    with pytest.raises(UsageError, match="use the subcommand 'blender-data'"):
        check_dataset(NerfstudioDataParserConfig(data=scene))
    with pytest.raises(UsageError, match="add the subcommand 'nerfstudio-data'"):
        check_dataset(BlenderDataParserConfig(data=capture))
    check_dataset(NerfstudioDataParserConfig(data=capture))
    check_dataset(NerfstudioDataParserConfig(data=capture / "transforms.json"))


@pytest.mark.parametrize("method", ["rff-nerf-lite", "rff-nerfacto-lite", "nerfacto"])
def test_the_subcommand_hint_names_the_method_being_trained(method, scene, capture):
    """The hint is a command that works for this method: the parser's subcommand comes after the method's options
    (not "no subcommand", which gives rff-nerfacto's default parser, nerfstudio-data, again)."""
    with pytest.raises(UsageError) as info:
        check_dataset(NerfstudioDataParserConfig(data=scene), method=method)
    assert str(info.value) == (
        f"{scene} holds transforms_train.json, a Blender-format scene; use the subcommand 'blender-data' after the "
        f"options: ns-train {method} ... blender-data --data {scene}"
    )
    with pytest.raises(UsageError, match=f"options: ns-train {method} ... nerfstudio-data --data {capture}$"):
        check_dataset(BlenderDataParserConfig(data=capture), method=method)


def test_nerfstudio_capture_with_missing_images(capture, tmp_path):
    data = _copy(capture, tmp_path)
    (data / "images" / "frame_00002.png").unlink()
    (data / "images" / "frame_00003.png").unlink()
    with pytest.raises(UsageError) as info:
        check_dataset(NerfstudioDataParserConfig(data=data))
    assert str(info.value) == (
        f"2 image(s) listed in transforms.json are missing under {data}, e.g. images/frame_00002.png; "
        "restore them or remove their frames from transforms.json"
    )
    with pytest.raises(UsageError, match="e.g. images/frame_00002.png"):
        check_dataset(NerfstudioDataParserConfig(data=data / "transforms.json"))  # relative to the json's folder
    # with --downscale-factor 2 nerfstudio reads images_2/<name>
    message = r"10 image\(s\) .* e.g. images_2/frame_00001.png; --downscale-factor 2 reads images_2/: make it"
    with pytest.raises(UsageError, match=message):
        check_dataset(NerfstudioDataParserConfig(data=data, downscale_factor=2))
    shutil.copytree(capture / "images", data / "images_2")
    check_dataset(NerfstudioDataParserConfig(data=data, downscale_factor=2))


@pytest.mark.parametrize("count, listed", [(1, "only 1 frame"), (0, "no frames")])
def test_nerfstudio_capture_needs_two_frames(count, listed, capture, tmp_path):
    data = _copy(capture, tmp_path)
    _keep_frames(data, count)
    with pytest.raises(UsageError) as info:
        check_dataset(NerfstudioDataParserConfig(data=data))
    assert str(info.value) == (
        f"{data / 'transforms.json'} lists {listed}; nerfstudio-data (it splits them into training and evaluation "
        "views) needs at least 2 image(s)"
    )
    two = _copy(capture, tmp_path / "two")
    _keep_frames(two, 2)
    with pytest.raises(UsageError, match="lists 2 frames, and --train-split-fraction 0.9 puts all of them in train"):
        check_dataset(NerfstudioDataParserConfig(data=two))  # nerfstudio's split would leave none to evaluate
    check_dataset(NerfstudioDataParserConfig(data=two, train_split_fraction=0.5))
    check_dataset(NerfstudioDataParserConfig(data=two, eval_mode="all"))


def test_nerfstudio_capture_images_must_be_readable_and_of_one_size(capture, tmp_path):
    data = _copy(capture, tmp_path)
    (data / "images" / "frame_00004.png").write_text("not an image")
    with pytest.raises(UsageError, match=r"frame_00004.png, listed in transforms.json, cannot be read \(not an imag"):
        check_dataset(NerfstudioDataParserConfig(data=data))
    iio.imwrite(data / "images" / "frame_00004.png", np.zeros((12, 10, 3), np.uint8))
    with pytest.raises(UsageError, match=r"frame_00004.png is 10x12 but images/frame_00001.png is 8x8: the images"):
        check_dataset(NerfstudioDataParserConfig(data=data))


def test_nerfstudio_capture_masks_must_exist(capture, tmp_path):
    data = _copy(capture, tmp_path)
    (data / "masks").mkdir()
    for index in range(1, 10):  # the tenth is missing
        iio.imwrite(data / "masks" / f"frame_{index:05d}.png", np.full((8, 8), 255, np.uint8))
    _edit_frames(data / "transforms.json", lambda meta: [frame.update(mask_path=frame["file_path"].replace(
        "images/", "masks/")) for frame in meta["frames"]])  # fmt: skip
    with pytest.raises(UsageError, match=r"1 mask\(s\) .* e.g. masks/frame_00010.png; restore them or remove mask"):
        check_dataset(NerfstudioDataParserConfig(data=data))
    iio.imwrite(data / "masks" / "frame_00010.png", np.full((8, 8), 255, np.uint8))
    check_dataset(NerfstudioDataParserConfig(data=data))


def test_nerfstudio_capture_needs_poses_and_intrinsics(capture, tmp_path):
    """nerfstudio's parser asserts (or raises KeyError) on these; the check names the frame and the key."""
    data = _copy(capture, tmp_path)
    transforms = data / "transforms.json"
    _edit_frames(transforms, lambda meta: meta["frames"][1].pop("transform_matrix"))
    with pytest.raises(UsageError, match=r"^frame 1 of .*transforms.json has no transform_matrix; add it to every"):
        check_dataset(NerfstudioDataParserConfig(data=data))
    _edit_frames(transforms, lambda meta: meta["frames"][1].update(transform_matrix=[[1, 0, 0], [0, 1, 0]]))
    with pytest.raises(UsageError, match="frame 1 .* not a 4x4 \\(or 3x4\\) matrix of finite numbers"):
        check_dataset(NerfstudioDataParserConfig(data=data))
    pose = json.loads((capture / "transforms.json").read_text())["frames"][1]["transform_matrix"]
    _edit_frames(transforms, lambda meta: meta["frames"][1].update(transform_matrix=pose))
    check_dataset(NerfstudioDataParserConfig(data=data))

    # intrinsics may sit in each frame instead of the top level; a frame without them (or a top level) fails
    def per_frame(meta):
        for key in ("fl_x", "cx"):
            value = meta.pop(key)
            for frame in meta["frames"]:
                frame[key] = value

    _edit_frames(transforms, per_frame)
    check_dataset(NerfstudioDataParserConfig(data=data))
    _edit_frames(transforms, lambda meta: [meta["frames"][2].pop(key) for key in ("fl_x", "cx")])
    with pytest.raises(UsageError) as info:
        check_dataset(NerfstudioDataParserConfig(data=data))
    assert str(info.value) == (
        f"frame 2 of {transforms} has no fl_x, cx, nor has the file's top level; give the camera intrinsics "
        "fl_x, fl_y, cx, cy, w, h once at the top level or in every frame"
    )


def test_blender_scene_needs_poses(scene, tmp_path):
    data = _copy(scene, tmp_path)
    _edit_frames(data / "transforms_val.json", lambda meta: meta["frames"][0].update(transform_matrix="eye"))
    with pytest.raises(UsageError, match="^frame 0 of .*transforms_val.json has a transform_matrix that is not"):
        check_blender_dataset(data, "val")
    _edit_frames(data / "transforms_test.json", lambda meta: meta["frames"][0].pop("file_path"))
    with pytest.raises(UsageError, match="frame 0 of .*transforms_test.json has no file_path; add it to every frame"):
        check_blender_dataset(data, "test")


@pytest.mark.parametrize(
    "override, message",
    [
        ({"filter_num_layers": 0}, "filter-num-layers must be positive"),
        ({"num_frequencies": 0}, "num-frequencies must be positive"),
        ({"rff_sigma": -1.0}, "rff-sigma must be positive"),
        ({"skip_connections": (8,)}, r"skip-connections \[8\] must lie in 1..6"),
        ({"skip_connections": (0,)}, r"skip-connections \[0\] must lie in 1..6"),
        ({"collider_params": {"near_plane": -1.0, "far_plane": 2.0}}, "0 <= near_plane < far_plane"),
        ({"collider_params": {"near_plane": 2.0}}, "0 <= near_plane < far_plane"),
        ({"line_search": LineSearchConfig(lr_min=1e-2, lr_max=1e-3)}, "line-search.lr-min"),
        ({"line_search": LineSearchConfig(c1=1.5)}, "line-search.c1 must lie in"),
        ({"collider_params": {"near_plane": 6.0, "far_plane": 2.0}}, "near_plane < far_plane"),
    ],
)
def test_unsupported_options(override, message):
    check_model_config(RFFNeRFModelConfig())
    with pytest.raises(UsageError, match=message):
        check_model_config(RFFNeRFModelConfig(**override))


@pytest.mark.parametrize(
    "override, message",
    [
        ({"hidden_dim": 0}, "hidden-dim must be positive"),
        ({"base_num_layers": 0}, "base-num-layers must be positive"),
        ({"pe_scale": float("nan")}, "pe-scale must be a finite number"),
        ({"num_nerf_samples_per_ray": 0}, "num-nerf-samples-per-ray must be positive"),
        ({"num_proposal_samples_per_ray": (64,)}, "a positive count for each of the 2 proposal iterations"),
        ({"near_plane": 2.0, "far_plane": 1.0}, "near-plane must lie in"),
        ({"num_proposal_samples_per_ray": (0, 96)}, "num-proposal-samples-per-ray 0 96 needs a positive count"),
        ({"near_plane": -1.0}, "near-plane must lie in"),
        ({"base_res": 32}, "base-res does not apply to rff-nerfacto"),
        ({"features_per_level": 4}, "features-per-level does not apply"),
        ({"line_search": LineSearchConfig(lr_max=-1.0)}, "line-search.lr-max"),
        ({"appearance_embed_dim": -1}, "appearance-embed-dim must be positive"),
        ({"distortion_loss_mult": -1.0}, "distortion-loss-mult must be zero or positive"),
        ({"proposal_weights_anneal_max_num_iters": 0}, "proposal-weights-anneal-max-num-iters must be positive"),
        ({"average_init_density": -1.0}, "average-init-density must be positive"),
        ({"filter_init_gain": float("nan")}, "filter-init-gain must be a finite number"),
        ({"coarse_sampling_steps": -1}, "coarse-sampling-steps must be zero or positive"),
        ({"coarse_sampling_steps": 10, "coarse_nerf_samples_per_ray": 0}, "coarse-nerf-samples-per-ray must be"),
        ({"coarse_sampling_steps": 10, "coarse_proposal_samples_per_ray": (8,)}, "coarse-proposal-samples-per-ray 8 "),
        ({"num_levels": 8}, "num-levels does not apply to rff-nerfacto"),
        ({"max_res": 4096}, "max-res does not apply to rff-nerfacto"),
        ({"log2_hashmap_size": 21}, "log2-hashmap-size does not apply"),
    ],
)
def test_unsupported_nerfacto_options(override, message):
    check_nerfacto_config(RFFNerfactoModelConfig())
    with pytest.raises(UsageError, match=message):
        check_nerfacto_config(RFFNerfactoModelConfig(**override))


def test_pipeline_stops_with_one_line(scene, tmp_path, capsys):
    """In-process: the pipeline prints one error line and exits with status 2 (no traceback)."""
    from rff_field.nerf.method_configs import rff_nerf_lite

    config = rff_nerf_lite.config.pipeline
    import copy

    config = copy.deepcopy(config)
    config.datamanager.data = tmp_path / "missing"
    with pytest.raises(SystemExit) as exit_info:
        config.setup(device="cpu", test_mode="val")
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"{Path(sys.argv[0]).name}: error: ") and "does not exist" in err[0]

    config.datamanager.data = scene
    config.model.filter_num_layers = 0
    with pytest.raises(SystemExit):
        config.setup(device="cpu", test_mode="val")
    assert "filter-num-layers must be positive" in capsys.readouterr().err


def test_trainer_refuses_a_negative_learning_rate_before_the_config_dump(scene, capsys):
    import copy

    from rff_field.nerf.method_configs import rff_nerf_lite

    config = copy.deepcopy(rff_nerf_lite.config)
    config.pipeline.datamanager.data = scene
    config.optimizers["fields"]["optimizer"].lr = -1.0
    with pytest.raises(SystemExit) as exit_info:
        config.print_to_terminal()
    assert exit_info.value.code == 2
    err = capsys.readouterr()
    assert "--optimizers.fields.optimizer.lr must be a positive finite number, got -1.0" in err.err
    assert "Config" not in err.out


def test_optimizer_groups_are_named_as_ns_train_spells_them():
    from nerfstudio.engine.optimizers import AdamOptimizerConfig

    with pytest.raises(UsageError, match=r"^--optimizers\.proposal-networks\.optimizer\.lr must be a positive"):
        check_optimizers({"proposal_networks": {"optimizer": AdamOptimizerConfig(lr=0.0), "scheduler": None}})
    with pytest.raises(UsageError, match=r"^--optimizers\.fields\.optimizer\.lr must be a positive finite number"):
        check_optimizers({"fields": {"optimizer": AdamOptimizerConfig(lr=float("inf")), "scheduler": None}})


def test_images_too_small_on_either_side_are_refused(tmp_path):
    from PIL import Image

    from rff_field.nerf.checks import MIN_EVAL_IMAGE_SIDE, check_scaled_image_size

    for size in (
        (4 * MIN_EVAL_IMAGE_SIDE, MIN_EVAL_IMAGE_SIDE - 1),
        (MIN_EVAL_IMAGE_SIDE - 1, 4 * MIN_EVAL_IMAGE_SIDE),
    ):
        Image.new("RGB", size).save(tmp_path / "image.png")
        with pytest.raises(UsageError, match=f"the images of the dataset are {size[0]}x{size[1]}"):
            check_scaled_image_size(tmp_path / "image.png", 1.0, "--downscale-factor")
    check_scaled_image_size(tmp_path / "image.png", 2.0, "--downscale-factor")  # scaled up: large enough


def test_trainer_refuses_to_write_over_an_earlier_runs_checkpoints(scene, tmp_path, capsys):
    import copy

    from rff_field.nerf.method_configs import rff_nerf_lite

    config = copy.deepcopy(rff_nerf_lite.config)
    config.pipeline.datamanager.data = scene
    config.machine.device_type = "cpu"
    config.output_dir, config.timestamp = tmp_path, "again"
    config.print_to_terminal()  # a new folder
    checkpoint = config.get_checkpoint_dir() / "step-000000099.ckpt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"earlier run")
    with pytest.raises(SystemExit) as exit_info:
        config.print_to_terminal()
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "holds the checkpoints of an earlier run; pass --load-dir" in err and "another --timestamp" in err
    config.load_dir = checkpoint.parent
    config.print_to_terminal()  # continuing it is what --load-dir asks for
    assert checkpoint.read_bytes() == b"earlier run"


def test_rff_nerfacto_on_a_blender_scene_names_the_sampling_that_trains_there(scene, capture, capsys):
    import copy

    from rff_field.nerf.method_configs import rff_nerfacto, rff_nerfacto_lite

    def trainer(spec, data: Path, blender: bool, **model_options):
        config = copy.deepcopy(spec.config)
        config.machine.device_type = "cpu"
        if blender:
            config.pipeline.datamanager.dataparser = BlenderDataParserConfig()
        config.pipeline.datamanager.data = data
        for name, value in model_options.items():
            setattr(config.pipeline.model, name, value)
        return config

    def notice(config) -> str:
        config.print_to_terminal()
        return capsys.readouterr().out.replace("\n", "")

    # rff-nerfacto starts coarse and -lite samples coarsely throughout: no notice; started with nerfacto's counts on
    # a Blender scene: a notice (none on a capture)
    for quiet in (trainer(rff_nerfacto_lite, scene, blender=True), trainer(rff_nerfacto, scene, blender=True),
                  trainer(rff_nerfacto, capture, blender=False, coarse_sampling_steps=0)):  # fmt: skip
        assert object_in_void_sampling_notice(quiet.pipeline) is None
        assert "Notice" not in notice(quiet)
    started_dense = notice(trainer(rff_nerfacto, scene, blender=True, coarse_sampling_steps=0))
    assert "Notice: rff-nerfacto starts with 256 + 96 proposal samples per ray; on Blender scenes" in started_dense
    hint = "--pipeline.model.num-proposal-samples-per-ray 32 16 --pipeline.model.num-nerf-samples-per-ray 16, or "
    assert hint + "--pipeline.model.coarse-sampling-steps 200 to start with those counts" in started_dense
    coarse_dense = notice(trainer(rff_nerfacto, scene, blender=True, coarse_proposal_samples_per_ray=(64, 32)))
    assert "starts with 64 + 32 proposal samples" in coarse_dense
    assert "--pipeline.model.coarse-proposal-samples-per-ray 32 16 --pipeline.model.coarse-nerf" in coarse_dense


def test_a_capture_of_transparent_images_names_the_background_that_learns_them(capture, tmp_path, capsys):
    import copy

    from PIL import Image

    from rff_field.nerf.method_configs import rff_nerfacto_lite
    from rff_field.nerf.pipeline import transparent_images_notice

    def trainer(data: Path, background: str):
        config = copy.deepcopy(rff_nerfacto_lite.config)
        config.machine.device_type = "cpu"
        config.pipeline.datamanager.data = data
        config.pipeline.model.background_color = background
        return config

    assert trainer(capture, "last_sample").pipeline.model.background_color == "last_sample"  # nerfacto's default
    assert transparent_images_notice(trainer(capture, "last_sample").pipeline) is None  # RGB images
    transparent = _copy(capture, tmp_path)
    for path in transparent.rglob("*.png"):
        with Image.open(path) as image:
            image.convert("RGBA").save(path)  # opaque everywhere: nothing to say
    assert transparent_images_notice(trainer(transparent, "last_sample").pipeline) is None
    for path in transparent.rglob("*.png"):
        with Image.open(path) as image:
            pixels = np.array(image)
        pixels[0, 0, 3] = 0
        Image.fromarray(pixels).save(path)
    config = trainer(transparent, "last_sample")
    config.print_to_terminal()
    out = capsys.readouterr().out.replace("\n", "")
    assert "Notice: the capture's images have an alpha channel" in out
    assert "pass --pipeline.model.background-color random" in out
    assert transparent_images_notice(trainer(transparent, "random").pipeline) is None


@pytest.mark.parametrize("blender, chosen", [(True, 200), (False, 0)])
def test_rff_nerfacto_chooses_its_coarse_start_by_the_data(scene, capture, blender, chosen):
    """By default a coarse start on a Blender scene (an object in a void) and none on a capture, chosen before
    config.yml is written so that it holds the choice; a value given on the command line is kept."""
    import copy

    from rff_field.nerf.method_configs import rff_nerfacto

    assert rff_nerfacto.config.pipeline.model.coarse_sampling_steps is None
    for given, expected in ((None, chosen), (0, 0), (50, 50)):
        config = copy.deepcopy(rff_nerfacto.config)
        config.machine.device_type = "cpu"
        if blender:
            config.pipeline.datamanager.dataparser = BlenderDataParserConfig()
        config.pipeline.datamanager.data = scene if blender else capture
        config.pipeline.model.coarse_sampling_steps = given
        config.print_to_terminal()
        assert config.pipeline.model.coarse_sampling_steps == expected


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: setattr(c.optimizers["fields"]["optimizer"], "eps", -1.0),
         "--optimizers.fields.optimizer.eps must be zero or positive"),
        (lambda c: setattr(c.optimizers["fields"]["optimizer"], "weight_decay", -1.0),
         "--optimizers.fields.optimizer.weight-decay must be zero or positive"),
        (lambda c: setattr(c.optimizers["fields"]["scheduler"], "lr_final", -1.0),
         "--optimizers.fields.scheduler.lr-final must be positive"),
        (lambda c: setattr(c, "max_num_iterations", -5), "--max-num-iterations must be positive"),
        (lambda c: setattr(c.machine, "seed", -1), "--machine.seed must be between 0 and 2**32 - 1"),
        (lambda c: setattr(c.pipeline.datamanager, "train_num_rays_per_batch", 0),
         "--pipeline.datamanager.train-num-rays-per-batch must be positive"),
    ],
)  # fmt: skip
def test_trainer_refuses_settings_torch_would_refuse_later(change, message, scene, capsys):
    import copy

    from rff_field.nerf.method_configs import rff_nerf_lite

    config = copy.deepcopy(rff_nerf_lite.config)
    config.pipeline.datamanager.data = scene
    change(config)
    with pytest.raises(SystemExit) as exit_info:
        config.print_to_terminal()
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_ns_train_on_a_folder_without_transforms(tmp_path):
    """The real CLI: clear message, non-zero exit, no traceback."""
    (tmp_path / "photos").mkdir()
    cmd = [
        str(BIN / "ns-train"),
        "rff-nerf-lite",
        "--data",
        str(tmp_path / "photos"),
        "--machine.device-type",
        "cpu",
        "--vis",
        "tensorboard",
        "--output-dir",
        str(tmp_path / "runs"),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    text = " ".join((out.stdout + out.stderr).split())
    assert out.returncode == 2
    assert "has no transforms_train.json: not a Blender-format scene" in text
    assert "Traceback" not in text
    assert "Config" not in out.stdout and not (tmp_path / "runs").exists()  # stopped before the dump and the save


def test_export_mesh_cli_bad_input_is_one_line(tmp_path):
    out = subprocess.run(
        [str(BIN / "rff-export-mesh"), "--load-config", str(tmp_path / "none.yml"), "--output-path", "m.ply"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert out.returncode == 2
    hint = "pass the config.yml that ns-train printed at the end of training"
    lines = out.stderr.strip().splitlines()
    assert lines[-1] == f"rff-export-mesh: error: {tmp_path / 'none.yml'} does not exist; {hint}"
    assert "Traceback" not in out.stderr and not (tmp_path / "m.ply").exists()


def test_ns_train_stops_a_diverging_run_with_one_line(scene, tmp_path):
    """A learning rate of 1e30 puts Adam's first update near 1e30 (its step is about lr times a sign), so the second
    forward pass overflows float32, by construction."""
    cmd = [str(BIN / "ns-train"), "rff-nerf-lite", "--data", str(scene), "--machine.device-type", "cpu", "--vis",
           "tensorboard", "--output-dir", str(tmp_path / "runs"), "--max-num-iterations", "5",
           "--optimizers.fields.optimizer.lr", "1e30", "--pipeline.model.compute-lpips", "False"]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode != 0 and "Traceback" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert re.match(r"ns-train: training diverged at step 1: the loss is (nan|inf)", last)
    assert "--optimizers.fields.optimizer.lr (now 1e+30)" in last and "no checkpoint was written" in last
    assert not list((tmp_path / "runs").rglob("*.ckpt"))


def test_trainer_refuses_a_device_this_machine_lacks(scene, monkeypatch, capsys):
    """CUDA is nerfstudio's default device: without it, one line before the config dump (not a traceback after)."""
    import copy

    import torch

    from rff_field.nerf.method_configs import rff_nerf_lite

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    config = copy.deepcopy(rff_nerf_lite.config)
    config.pipeline.datamanager.data = scene
    for device, name in (("cuda", "CUDA"), ("mps", "MPS")):
        config.machine.device_type = device
        with pytest.raises(SystemExit) as exit_info:
            config.print_to_terminal()
        assert exit_info.value.code == 2
        out = capsys.readouterr()
        assert out.err.strip().splitlines() == [
            f"{Path(sys.argv[0]).name}: error: {name} is not available on this machine; pass --machine.device-type cpu"
        ]
        assert "Config" not in out.out
    config.machine.device_type = "cpu"
    config.check()


def _missing_image(data: Path) -> str:
    (data / "images" / "frame_00002.png").unlink()
    return (
        f"1 image(s) listed in transforms.json are missing under {data}, e.g. images/frame_00002.png; restore them "
        "or remove their frames from transforms.json"
    )


def _one_frame(data: Path) -> str:
    _keep_frames(data, 1)
    return (
        f"{data / 'transforms.json'} lists only 1 frame; nerfstudio-data (it splits them into training and "
        "evaluation views) needs at least 2 image(s)"
    )


@pytest.mark.parametrize(
    "method, dataset, break_it, cpu",
    [
        ("rff-nerfacto-lite", "capture", _missing_image, True),
        ("rff-nerfacto-lite", "capture", _one_frame, True),
        ("rff-nerf-lite", "scene", lambda data: "CUDA is not available on this machine; pass --machine.device-type "
         "cpu", False),
        ("rff-nerfacto-lite", "scene", lambda data: f"{data} holds transforms_train.json, a Blender-format scene; use "
         f"the subcommand 'blender-data' after the options: ns-train rff-nerfacto-lite ... blender-data --data {data}",
         True),
    ],
    ids=["missing-image", "one-frame", "no-cuda", "blender-scene-for-nerfacto"],
)  # fmt: skip
def test_ns_train_refuses_before_writing_anything(method, dataset, break_it, cpu, request, tmp_path):
    """The real CLI: one line, status 2, before the config dump and before config.yml and the run folder."""
    data = _copy(request.getfixturevalue(dataset), tmp_path)
    message = break_it(data)
    cmd = [str(BIN / "ns-train"), method, "--data", str(data), "--vis", "tensorboard",
           "--output-dir", str(tmp_path / "runs")] + (["--machine.device-type", "cpu"] if cpu else [])  # fmt: skip
    env = {**ns_environment(), "CUDA_VISIBLE_DEVICES": ""}  # no CUDA, on any machine
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip().splitlines()[-1] == f"ns-train: error: {message}"
    assert "Traceback" not in out.stderr and "Config" not in out.stdout
    assert not (tmp_path / "runs").exists() and not list(tmp_path.rglob("config.yml"))


@pytest.fixture
def relative_run(scene, tmp_path):
    """A run's config.yml (with a stand-in checkpoint) trained in ``train/`` on the relative ``--data blender``."""
    import copy

    from rff_field.nerf.method_configs import rff_nerf_lite

    shutil.copytree(scene, tmp_path / "train" / "blender")
    config = copy.deepcopy(rff_nerf_lite.config)
    config.data = config.pipeline.datamanager.data = Path("blender")
    config.output_dir, config.timestamp = tmp_path / "train" / "outputs", "run"
    config.save_config()
    checkpoint = config.get_checkpoint_dir() / "step-000000001.ckpt"
    checkpoint.parent.mkdir(parents=True)
    checkpoint.write_bytes(b"stand-in")
    (tmp_path / "elsewhere").mkdir()
    return config.get_base_dir() / "config.yml"


def _relative_data_message(where: str, cwd: Path) -> str:
    return (
        f"{where} holds the relative data path blender, resolved from the current folder {cwd}, where it does not "
        "exist; run from the folder where the run was trained (or edit data in config.yml)"
    )


def test_a_runs_relative_data_path_read_from_another_folder(relative_run, tmp_path, monkeypatch, capsys):
    """Commands that load a run have no --data: the message names the run's relative path, not --data."""
    from rff_field.nerf.loading import read_run_config

    monkeypatch.chdir(tmp_path / "elsewhere")
    with pytest.raises(UsageError) as info:
        read_run_config(relative_run)
    assert str(info.value) == _relative_data_message(str(relative_run), tmp_path / "elsewhere")
    import yaml

    pipeline = yaml.load(relative_run.read_text(), Loader=yaml.Loader).pipeline
    with pytest.raises(SystemExit) as exit_info:
        pipeline.setup(device="cpu", test_mode="test")  # how ns-eval, ns-render and ns-viewer load the run
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"{Path(sys.argv[0]).name}: error: " + _relative_data_message("the run's config.yml",
                                                                                  tmp_path / "elsewhere")]  # fmt: skip
    monkeypatch.chdir(tmp_path / "train")
    assert read_run_config(relative_run).pipeline.datamanager.data == Path("blender")


def test_a_link_to_a_runs_config_finds_the_checkpoints_beside_the_file(relative_run, tmp_path, monkeypatch):
    from rff_field.nerf.loading import read_run_config

    link = tmp_path / "train" / "latest.yml"
    link.symlink_to(relative_run)
    monkeypatch.chdir(tmp_path / "train")
    assert read_run_config(link).relative_model_dir == relative_run.parent.resolve() / "nerfstudio_models"


@pytest.mark.parametrize("command", ["rff-export-mesh", "ns-eval"])
def test_commands_loading_a_run_from_another_folder(command, relative_run, tmp_path):
    output = tmp_path / "elsewhere" / ("mesh.ply" if command == "rff-export-mesh" else "eval.json")
    cmd = [str(BIN / command), "--load-config", str(relative_run), "--output-path", str(output)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path / "elsewhere",
                         env=ns_environment())  # fmt: skip
    where = str(relative_run) if command == "rff-export-mesh" else "the run's config.yml"
    assert out.returncode == 2, out.stderr[-2000:]
    assert out.stderr.strip().splitlines()[-1] == f"{command}: error: " + _relative_data_message(
        where, tmp_path / "elsewhere"
    )
    assert "Traceback" not in out.stderr and "pass --data" not in out.stderr and not output.exists()
