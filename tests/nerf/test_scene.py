"""The bundled synthetic scene, as a Blender-format dataset and as an unbounded nerfstudio-data capture, which
nerfstudio reads with the cameras we rendered."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from nerfstudio.data.dataparsers.nerfstudio_dataparser import NerfstudioDataParserConfig
from PIL import Image

from rff_field.core.errors import UsageError
from rff_field.nerf.synthetic_scene import (
    CAPTURE_ANGLE_X,
    GROUND_RADIUS,
    GROUND_Z,
    CaptureSpec,
    SceneSpec,
    cast_rays,
    cast_rays_unbounded,
    look_at,
    orbit_pose,
    pixel_rays,
    render_view,
    write_blender_scene,
    write_nerfstudio_capture,
)


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    spec = SceneSpec(image_size=32, num_train=5, num_val=2, num_test=3, supersample=2)
    return write_blender_scene(tmp_path_factory.mktemp("scene") / "scene", spec), spec


def test_layout_and_json(scene):
    path, spec = scene
    for split, n in (("train", spec.num_train), ("val", spec.num_val), ("test", spec.num_test)):
        meta = json.loads((path / f"transforms_{split}.json").read_text())
        assert len(meta["frames"]) == n and meta["camera_angle_x"] > 0
        for i, frame in enumerate(meta["frames"]):
            image = Image.open(path / (frame["file_path"][2:] + ".png"))
            assert image.mode == "RGBA" and image.size == (32, 32)
            c2w = np.array(frame["transform_matrix"])
            assert c2w.shape == (4, 4) and np.allclose(c2w[:3, :3] @ c2w[:3, :3].T, np.eye(3), atol=1e-6)
            assert frame["file_path"] == f"./{split}/r_{i}"


def test_images_have_objects_background_and_sharp_edges(scene):
    path, _ = scene
    rgba = np.asarray(Image.open(path / "test" / "r_0.png")).astype(float) / 255
    alpha = rgba[..., 3]
    assert 0.1 < (alpha > 0.5).mean() < 0.9  # object and transparent background both present
    assert (alpha == 0).any() and (alpha == 1).any()
    opaque = rgba[alpha == 1][:, :3]
    assert len(np.unique(np.round(opaque * 20), axis=0)) > 8  # several colours: checker, faces, stripes
    jumps = np.abs(np.diff(rgba[..., :3], axis=1)).max(axis=-1)[(alpha[:, 1:] == 1) & (alpha[:, :-1] == 1)]
    assert (jumps > 0.3).any()  # sharp colour edges inside the object


def test_nerfstudio_rays_hit_what_we_rendered(scene):
    """nerfstudio's blender parser + camera rays reproduce our renderer's silhouette: same convention."""
    path, _ = scene
    outputs = BlenderDataParserConfig(data=path).setup().get_dataparser_outputs(split="test")
    for index in range(len(outputs.image_filenames)):
        rays = outputs.cameras.generate_rays(camera_indices=index)
        origins = rays.origins.reshape(-1, 3).numpy()
        dirs = rays.directions.reshape(-1, 3).numpy()
        _, hit = cast_rays(origins, dirs)
        alpha = np.asarray(Image.open(outputs.image_filenames[index]))[..., 3].reshape(-1) / 255
        solid = (alpha == 0) | (alpha == 1)  # away from anti-aliased edges
        assert solid.mean() > 0.5
        assert (hit[solid] == (alpha[solid] == 1)).mean() > 0.995


def test_render_is_deterministic_and_refuses_to_overwrite(scene, tmp_path):
    path, spec = scene
    again = write_blender_scene(tmp_path / "again", spec)
    for name in ("transforms_train.json", "train/r_3.png", "test/r_2.png"):
        assert (again / name).read_bytes() == (path / name).read_bytes()
    with pytest.raises(UsageError, match="not empty"):
        write_blender_scene(path, spec)
    with pytest.raises(ValueError, match="at least one view"):
        write_blender_scene(tmp_path / "none", SceneSpec(num_test=0))


def test_camera_helpers():
    c2w = orbit_pose(30.0, 20.0)
    assert np.isclose(np.linalg.norm(c2w[:3, 3]), 4.0)
    forward = -c2w[:3, 2]
    assert np.allclose(forward, -c2w[:3, 3] / 4.0)  # looks at the origin
    assert c2w[2, 1] > 0  # camera up has a positive world-z component
    top = look_at((0.0, 0.0, 3.0))
    assert np.allclose(-top[:3, 2], [0, 0, -1])
    image = render_view(orbit_pose(0.0, 30.0), 16, supersample=1)
    assert image.shape == (16, 16, 4) and set(np.unique(image[..., 3])) <= {0.0, 1.0}
    colours, hit = cast_rays(
        np.array([[0.0, 0.0, 4.0], [0.0, 0.0, 4.0]]), np.array([[0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    )
    assert hit.tolist() == [True, False]
    assert torch.all(torch.as_tensor(colours[0]) > 0)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    spec = CaptureSpec(image_size=24, num_views=10, supersample=1)
    return write_nerfstudio_capture(tmp_path_factory.mktemp("capture") / "capture", spec), spec


def test_capture_layout(capture):
    path, spec = capture
    meta = json.loads((path / "transforms.json").read_text())
    assert meta["camera_model"] == "OPENCV" and (meta["w"], meta["h"]) == (24, 24)
    assert [f["file_path"] for f in meta["frames"]] == [f"images/frame_{i:05d}.png" for i in range(1, 11)]
    for frame in meta["frames"]:
        image = Image.open(path / frame["file_path"])
        assert image.mode == "RGB" and image.size == (24, 24)
        position = np.array(frame["transform_matrix"])[:3, 3]
        assert spec.distance_min - 1e-9 <= np.linalg.norm(position) <= spec.distance_max + 1e-9
        assert position[2] > GROUND_Z  # above the ground


def test_capture_is_unbounded_objects_ground_and_sky(capture):
    """Every pixel is opaque, and a view shows the objects, the ground and the sky."""
    path, _ = capture
    meta = json.loads((path / "transforms.json").read_text())
    c2w = np.array(meta["frames"][0]["transform_matrix"])
    origins, dirs = pixel_rays(c2w, 24, CAPTURE_ANGLE_X, 1)
    _, objects = cast_rays(origins, dirs)
    dirs = dirs / np.linalg.norm(dirs, axis=-1, keepdims=True)
    ground_t = (GROUND_Z - origins[:, 2]) / np.where(dirs[:, 2] < 0, dirs[:, 2], -1e-12)
    ground_points = origins + dirs * ground_t[:, None]
    ground = ~objects & (dirs[:, 2] < 0) & (np.linalg.norm(ground_points[:, :2], axis=1) <= GROUND_RADIUS)
    sky = ~objects & ~ground
    assert objects.any() and ground.any() and sky.any()
    far = np.linalg.norm(ground_points[ground] - origins[ground], axis=1)
    assert far.max() > 2 * CaptureSpec().distance_max  # background far behind the objects


def test_nerfstudio_parser_rays_see_what_we_rendered(capture):
    """nerfstudio-data (its reorientation, recentring and scaling undone) gives the rays we rendered: the same
    colours pixel for pixel, and cameras inside its [-1, 1] scene box with the background far outside it."""
    path, _ = capture
    outputs = NerfstudioDataParserConfig(data=path, train_split_fraction=1.0).setup().get_dataparser_outputs("train")
    transform, scale = outputs.dataparser_transform, outputs.dataparser_scale
    rotation, translation = transform[:, :3], transform[:, 3]
    assert outputs.cameras.camera_to_worlds[:, :3, 3].abs().max() <= 1 + 1e-5
    for index in range(len(outputs.image_filenames)):
        rays = outputs.cameras.generate_rays(camera_indices=index)
        origins = (rays.origins.reshape(-1, 3) / scale - translation) @ rotation  # back to the world frame
        dirs = rays.directions.reshape(-1, 3) @ rotation
        expected = cast_rays_unbounded(origins.double().numpy(), dirs.double().numpy())
        image = np.asarray(Image.open(outputs.image_filenames[index])).reshape(-1, 3) / 255
        assert np.abs(image - expected).max() <= 0.5 / 255 + 1e-4


def test_capture_refuses_bad_input(capture, tmp_path):
    path, spec = capture
    with pytest.raises(UsageError, match="not empty"):
        write_nerfstudio_capture(path, spec)
    with pytest.raises(UsageError, match="at least two views"):
        write_nerfstudio_capture(tmp_path / "one", CaptureSpec(num_views=1))
