"""The density mesh on analytic fields: the region the cameras look at, the data's own coordinates, the ground cut."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from nerfstudio.cameras.cameras import Cameras
from nerfstudio.field_components.field_heads import FieldHeadNames

from rff_field.nerf.mesh_export import Frame, camera_focus, camera_region, density_mesh
from rff_field.nerf.synthetic_scene import look_at, orbit_pose

CENTRE, RADIUS, GROUND = np.array([0.2, -0.1, 0.3]), 0.25, -0.1  # in the model's (nerfstudio's) frame


class AnalyticField:
    """A sphere of density 100 (and optionally a ground below GROUND), coloured by height."""

    def __init__(self, ground: bool = False) -> None:
        self.ground = ground

    def density_fn(self, positions):
        inside = RADIUS - (positions - torch.as_tensor(CENTRE, dtype=positions.dtype)).norm(dim=-1)
        if self.ground:
            inside = torch.maximum(inside, GROUND - positions[..., 2])
        return 100 * torch.sigmoid(50 * inside)[..., None]

    def forward(self, samples):
        height = samples.frustums.origins[..., 2:]
        return {FieldHeadNames.RGB: torch.cat([height.sigmoid(), height * 0, 1 - height.sigmoid()], dim=-1)}


def rotation_z(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def test_the_camera_focus_is_the_point_every_camera_looks_at():
    target = np.array([0.3, -0.2, 0.1])
    positions = [target + d * np.array([math.cos(a), math.sin(a), 0.4]) for a, d in ((0, 2.0), (2, 3.0), (4, 2.5))]
    c2w = torch.tensor(np.stack([look_at(p, target)[:3] for p in positions]), dtype=torch.float32)
    cameras = Cameras(camera_to_worlds=c2w, fx=10.0, fy=10.0, cx=8.0, cy=8.0)
    focus, radius = camera_focus(cameras)
    assert focus == pytest.approx(target, abs=1e-5)
    assert radius == pytest.approx(0.5 * 2.0 * math.hypot(1, 0.4), rel=1e-5)


def seen_by(points: np.ndarray, c2w: np.ndarray, fx: float, fy: float, cx: float, cy: float, w: int, h: int):
    """The share of pinhole cameras (OpenGL poses ``c2w`` [k, 3, 4], images ``w`` x ``h``) whose image each of
    ``points`` [n, 3] falls in, in front of the camera."""
    local = np.einsum("kji,knj->kni", c2w[:, :, :3], points[None] - c2w[:, None, :, 3])  # in each camera's frame
    depth = -local[..., 2]
    with np.errstate(divide="ignore", invalid="ignore"):
        u, v = cx + fx * local[..., 0] / depth, cy - fy * local[..., 1] / depth
    return ((depth > 0) & (u >= 0) & (u <= w) & (v >= 0) & (v <= h)).mean(axis=0)


@pytest.mark.parametrize("elevation", [(5, 50), (30, 80)])
def test_the_default_region_is_what_a_capture_rigs_cameras_look_at_in_the_datas_coordinates(elevation):
    target, rng = np.array([0.5, -0.3, 0.2]), np.random.default_rng(0)
    angles = zip(rng.uniform(0, 360, 40), rng.uniform(*elevation, 40), rng.uniform(2.5, 4.5, 40))
    poses = [orbit_pose(*angle)[:3] + np.c_[np.zeros((3, 3)), target] for angle in angles]
    frame = Frame(rotation_z(0.7), np.array([0.5, -1.0, 2.0]), 0.25)  # the data parser's normalisation
    in_model = [np.c_[frame.rotation @ pose[:, :3], frame.to_model(pose[None, :, 3])[0]] for pose in poses]
    cameras = Cameras(camera_to_worlds=torch.tensor(np.stack(in_model), dtype=torch.float32), fx=60.0, fy=60.0,
                      cx=32.0, cy=24.0)  # fmt: skip
    bbox_min, bbox_max = camera_region(cameras, frame)
    assert (bbox_min + bbox_max) / 2 == pytest.approx(target, abs=1e-3)
    points = rng.uniform(bbox_min, bbox_max, (4000, 3))
    assert (seen_by(points, np.stack(poses), 60.0, 60.0, 32.0, 24.0, 64, 48) >= 0.5).mean() >= 0.9
    scene_box = frame.to_model(np.array([target - 0.5, target + 0.5]))  # cut to a smaller scene box
    bbox_min, bbox_max = camera_region(cameras, frame, scene_box)
    assert bbox_min == pytest.approx(target - 0.5, abs=1e-3) and bbox_max == pytest.approx(target + 0.5, abs=1e-3)


def test_the_mesh_is_written_in_the_data_coordinates_the_data_parser_normalised():
    frame = Frame(rotation_z(0.7), np.array([0.5, -1.0, 2.0]), 0.25)  # p_model = 0.25 (R p + t)
    assert frame.from_model(frame.to_model(np.eye(3))) == pytest.approx(np.eye(3))
    centre = frame.from_model(CENTRE[None])[0]  # in the data's coordinates: radius 0.25 / 0.25 = 1
    half = 1.5 * RADIUS / frame.scale
    mesh = density_mesh(AnalyticField(), frame, centre - half, centre + half, 40, 50.0, 0.0, report=lambda _: None)
    distances = np.linalg.norm(mesh.vertices - centre, axis=-1)
    assert distances == pytest.approx(RADIUS / frame.scale, abs=2 * (2 * half / 39))
    outward = np.einsum("ij,ij->i", mesh.vertex_normals, mesh.vertices - centre)
    assert (outward > 0).mean() > 0.99
    assert mesh.visual.vertex_colors.shape == (len(mesh.vertices), 4)


@pytest.mark.parametrize("cut", [True, False])
def test_the_ground_below_the_region_is_cut_unless_kept(cut):
    frame = Frame(np.eye(3), np.zeros(3), 1.0)
    low, high = CENTRE - 0.6, CENTRE + 0.6
    notes = []
    mesh = density_mesh(AnalyticField(ground=True), frame, low, high, 40, 50.0, 0.0,
                        up=np.array([0.0, 0.0, 1.0]) if cut else None, report=notes.append)  # fmt: skip
    on_sphere = np.abs(np.linalg.norm(mesh.vertices - CENTRE, axis=-1) - RADIUS) < 0.05
    assert on_sphere.sum() > 100  # the object stays
    assert (mesh.vertices[:, 2] < GROUND + 0.05).any() != cut
    assert any("ground" in note for note in notes) == cut
