"""The bundled synthetic scene: a Blender-format dataset that nerfstudio reads with the cameras we rendered."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from nerfstudio.data.dataparsers.blender_dataparser import BlenderDataParserConfig
from PIL import Image

from rff_field.core.errors import UsageError
from rff_field.nerf.synthetic_scene import SceneSpec, cast_rays, look_at, orbit_pose, render_view, write_blender_scene


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
