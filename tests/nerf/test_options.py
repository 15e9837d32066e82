"""What ns-train settles before it saves a run's config: the device, the options left to the data, and one-line
errors for options and data that cannot work (in-process: the methods' configs parsed by tyro as ns-train does)."""

from __future__ import annotations

import pytest
import torch
import tyro

from rff_field.core.errors import UsageError
from rff_field.nerf.methods import rff_nerf_config, rff_nerfacto_config
from tests.nerf.conftest import ns_command

METHODS = {
    "rff-nerf": lambda: rff_nerf_config(),
    "rff-nerf-lite": lambda: rff_nerf_config(lite=True),
    "rff-nerfacto": lambda: rff_nerfacto_config(),
    "rff-nerfacto-lite": lambda: rff_nerfacto_config(lite=True),
}


def parsed(method: str, *args: str, tmp_path=None):
    """The method's config with ``args`` parsed as ns-train parses them (runs written under ``tmp_path``)."""
    default = METHODS[method]()
    config = tyro.cli(type(default), default=default, args=list(map(str, args)))
    if tmp_path is not None:
        config.output_dir = tmp_path
    return config


@pytest.mark.parametrize("cuda", [False, True])
def test_the_lite_methods_train_on_the_cpu_without_cuda_and_the_others_need_it(cuda, monkeypatch, scene, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    for method in METHODS:
        config = parsed(method, "--data", scene, "blender-data", tmp_path=tmp_path)
        if method.endswith("-lite"):
            notices = config.prepare()
            assert config.machine.device_type == ("cuda" if cuda else "cpu")
            assert any("CPU" in notice for notice in notices) != cuda
        elif not cuda:
            with pytest.raises(UsageError, match="--machine.device-type"):
                config.prepare()
    config = parsed("rff-nerf-lite", "--data", scene, "--machine.device-type", "cuda", tmp_path=tmp_path)
    if not cuda:  # the user's flag wins over the fallback
        with pytest.raises(UsageError, match="--machine.device-type"):
            config.prepare()


@pytest.mark.parametrize("given", [(), ("--pipeline.model.background-color", "random")])
def test_on_a_blender_scene_rff_nerfacto_chooses_an_object_in_a_void_unless_told(given, scene, capture, tmp_path):
    config = parsed("rff-nerfacto-lite", "--machine.device-type", "cpu", *given, "blender-data", "--data", scene,
                    tmp_path=tmp_path)  # fmt: skip
    notices = config.prepare()
    model = config.pipeline.model
    assert model.background_color == ("random" if given else "white")
    assert model.camera_optimizer.mode == "off" and model.coarse_sampling_steps == 200
    assert (model.disable_scene_contraction, model.proposal_initial_sampler, model.use_appearance_embedding) == (
        True, "uniform", False)  # fmt: skip
    assert model.average_init_density == 0.2 and model.embedding.pe_bands == "nerf-pytorch"
    (notice,) = [notice for notice in notices if "Blender" in notice]
    assert ("background-color" in notice) != bool(given)
    config = parsed("rff-nerfacto-lite", "--machine.device-type", "cpu", "--data", capture, tmp_path=tmp_path)
    assert not any("Blender" in notice for notice in config.prepare())
    model = config.pipeline.model
    chosen = (model.background_color, model.camera_optimizer.mode, model.coarse_sampling_steps,
              model.disable_scene_contraction, model.proposal_initial_sampler, model.use_appearance_embedding,
              model.average_init_density, model.embedding.pe_bands)  # fmt: skip
    assert chosen == ("last_sample", "SO3xR3", 0, False, "piecewise", True, 0.01, "loglinear")


def test_on_a_blender_scene_rff_nerfacto_samples_its_rays_only_inside_the_scene_box(scene, tmp_path):
    config = parsed("rff-nerfacto-lite", "--machine.device-type", "cpu", "blender-data", "--data", scene,
                    tmp_path=tmp_path)  # fmt: skip
    config.prepare()
    pipeline = config.pipeline.setup(device="cpu", test_mode="val")
    bundle, _ = pipeline.datamanager.next_train(0)
    samples, _, _ = pipeline.model.proposal_sampler(
        pipeline.model.collider(bundle), density_fns=pipeline.model.density_fns
    )
    positions = samples.frustums.get_positions()
    box = pipeline.model.scene_box.aabb
    assert ((positions >= box[0] - 1e-4) & (positions <= box[1] + 1e-4)).all()
    lengths = (bundle.fars - bundle.nears)[..., 0]
    assert lengths.max() > 2.0 and lengths.max() <= (box[1] - box[0]).norm() + 1e-4  # rays cross the box, not beyond


BAD_OPTIONS = [
    ("rff-nerf-lite", ["--pipeline.datamanager.camera-res-scale-factor", "nan"], "camera-res-scale-factor"),
    ("rff-nerf-lite", ["--pipeline.datamanager.camera-res-scale-factor", "inf"], "camera-res-scale-factor"),
    ("rff-nerf-lite", ["--pipeline.datamanager.camera-res-scale-factor", "0.01"], "camera-res-scale-factor"),
    (
        "rff-nerf-lite",
        ["--pipeline.model.embedding.num-frequencies", "0"],
        "--pipeline.model.embedding.num-frequencies",
    ),
    ("rff-nerf-lite", ["--pipeline.model.embedding.filter-layers", "0"], "--pipeline.model.embedding.filter-layers"),
    ("rff-nerf-lite", ["--pipeline.model.line-search.lr-max", "-1"], "--pipeline.model.line-search.lr-max"),
    ("rff-nerf-lite", ["--pipeline.model.skip-connections", "7"], "--pipeline.model.skip-connections"),
    ("rff-nerf-lite", ["--optimizers.fields.optimizer.lr", "0"], "--optimizers.fields.optimizer.lr"),
    ("rff-nerf-lite", ["--pipeline.datamanager.train-num-rays-per-batch", "0"], "train-num-rays-per-batch"),
    ("rff-nerf-lite", ["--machine.seed", "-1"], "--machine.seed"),
    ("rff-nerf-lite", ["--max-num-iterations", "0"], "--max-num-iterations"),
    ("rff-nerfacto-lite", ["--pipeline.model.num-levels", "4"], "--pipeline.model.num-levels"),
    ("rff-nerfacto-lite", ["--pipeline.model.coarse-proposal-samples-per-ray", "8"], "coarse-proposal-samples"),
    ("rff-nerfacto-lite", ["--pipeline.model.base-num-layers", "0"], "--pipeline.model.base-num-layers"),
]


@pytest.mark.parametrize("method, args, option", BAD_OPTIONS, ids=[" ".join(args) for _, args, _ in BAD_OPTIONS])
def test_options_that_cannot_work_stop_with_one_line_naming_them(method, args, option, scene, tmp_path):
    parser = ["blender-data", "--data", scene] if method.startswith("rff-nerfacto") else ["--data", scene]
    config = parsed(method, "--machine.device-type", "cpu", *args, *parser, tmp_path=tmp_path)
    with pytest.raises(UsageError, match=option.replace(".", r"\.")) as error:
        config.prepare()
    assert "\n" not in str(error.value)


BAD_DATA = [
    (lambda tmp, scene, capture: tmp / "missing", [], "--data"),
    (lambda tmp, scene, capture: capture, [], "nerfstudio-data"),  # a capture given to the Blender parser
    (lambda tmp, scene, capture: scene, ["nerfstudio-data"], "blender-data"),
    (lambda tmp, scene, capture: (scene / "transforms_val.json").unlink() or scene, [], "transforms_val"),
]


@pytest.mark.parametrize("data, parser, named", BAD_DATA, ids=["missing", "capture", "scene", "no-val-split"])
def test_a_dataset_that_cannot_work_stops_with_one_line_naming_what_to_do(
    data, parser, named, scene, capture, tmp_path
):
    copy = tmp_path / "copy"
    import shutil

    shutil.copytree(scene, copy)
    config = parsed("rff-nerf-lite", "--machine.device-type", "cpu", "--data", data(tmp_path, copy, capture), *parser,
                    tmp_path=tmp_path)  # fmt: skip
    with pytest.raises(UsageError, match=named):
        config.prepare()


def test_ns_train_stops_a_bad_option_with_one_line_and_status_2(scene, tmp_path):
    done = ns_command("ns-train", "rff-nerf-lite", "--data", str(scene), "--output-dir", str(tmp_path),
                      "--pipeline.datamanager.camera-res-scale-factor", "nan")  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("ns-train: error: --pipeline.datamanager.camera-res-scale")
    assert "Traceback" not in done.stderr and not any(tmp_path.iterdir())  # no run folder left behind


def set_in_frame_0(key, value):
    return lambda meta: meta["frames"][0].__setitem__(key, value)


def sixteen_bit_image(meta, folder):
    from PIL import Image

    Image.new("I;16", Image.open(folder / "train" / "r_0.png").size).save(folder / "train" / "r_0.png")


ROTATED = [[1, 0, 0, 0], [0, 0, -1, 0], [0, 1, 0, 4], [0, 0, 0, 1]]
BAD_CAMERAS = {
    "nan-pose": (set_in_frame_0("transform_matrix", [[float("nan")] * 4] + ROTATED[1:]), "transform_matrix"),
    "3x3-pose": (set_in_frame_0("transform_matrix", [row[:3] for row in ROTATED[:3]]), "transform_matrix"),
    "string-pose": (set_in_frame_0("transform_matrix", "identity"), "transform_matrix"),
    "zero-pose": (set_in_frame_0("transform_matrix", [[0] * 4] * 4), "transform_matrix"),
    "mirrored-pose": (set_in_frame_0("transform_matrix", [[-1, 0, 0, 0], *ROTATED[1:]]), "transform_matrix"),
    "zero-angle": (lambda meta: meta.__setitem__("camera_angle_x", 0), "camera_angle_x"),
    "nan-angle": (lambda meta: meta.__setitem__("camera_angle_x", float("nan")), "camera_angle_x"),
    "16-bit-image": (sixteen_bit_image, "r_0.png"),
}


@pytest.mark.parametrize("name", BAD_CAMERAS)
def test_camera_data_nerfstudio_would_misread_stops_before_a_run_folder_naming_file_and_field(name, scene, tmp_path):
    import json
    import shutil

    edit, field = BAD_CAMERAS[name]
    data = tmp_path / "scene"
    shutil.copytree(scene, data)
    meta = json.loads((data / "transforms_train.json").read_text())
    edit(meta, data) if name == "16-bit-image" else edit(meta)
    (data / "transforms_train.json").write_text(json.dumps(meta))
    runs = tmp_path / "runs"
    config = parsed("rff-nerf-lite", "--machine.device-type", "cpu", "--data", data, tmp_path=runs)
    config.set_timestamp()
    with pytest.raises(SystemExit) as ended:
        config.print_to_terminal()  # what ns-train calls before it writes the run folder
    assert ended.value.code == 2 and not runs.exists()
    with pytest.raises(UsageError, match=field):
        config.prepare()


def test_a_capture_with_non_finite_intrinsics_or_wrong_sizes_is_refused_naming_the_field(capture, tmp_path):
    import json
    import shutil

    for key, value in (("fl_x", float("nan")), ("w", 17), ("k1", "abc"), ("camera_model", "PINHOLE_X")):
        data = tmp_path / key
        shutil.copytree(capture, data)
        meta = json.loads((data / "transforms.json").read_text())
        meta[key] = value
        (data / "transforms.json").write_text(json.dumps(meta))
        config = parsed("rff-nerfacto-lite", "--machine.device-type", "cpu", "--data", data, tmp_path=tmp_path)
        with pytest.raises(UsageError, match=f"{key}") as error:
            config.prepare()
        assert "transforms.json" in str(error.value) and "\n" not in str(error.value)
