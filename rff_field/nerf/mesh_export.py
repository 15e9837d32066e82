"""A coloured mesh of a trained model's density in the data's own coordinates (:class:`Frame`): the region the
cameras look at, marching cubes at a threshold, the ground cut away, small components dropped."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np
import torch
import trimesh
from jaxtyping import Float
from nerfstudio.cameras.cameras import Cameras
from nerfstudio.cameras.rays import Frustums, RaySamples
from nerfstudio.field_components.field_heads import FieldHeadNames
from nerfstudio.fields.base_field import Field
from torch import Tensor

from rff_field.common.mesh import keep_components, marching_cubes, sample_grid
from rff_field.core.errors import UsageError

GROUND_MAX_TILT = math.radians(20)
"""How far from the cameras' mean up the normal of a plane that counts as ground may lean."""


@dataclass
class Frame:
    """The output frame of a mesh: the data's own coordinates (``p_model = scale * (R p + t)``, nerfstudio's
    ``dataparser_transforms.json``), or with ``identity`` nerfstudio's normalised ones."""

    rotation: Float[np.ndarray, "3 3"]
    translation: Float[np.ndarray, " 3"]
    scale: float

    @classmethod
    def of(cls, transform: Tensor, scale: float, identity: bool = False) -> "Frame":
        """The frame of a data parser's ``dataparser_transform`` (3x4) and ``dataparser_scale``."""
        if identity:
            return cls(np.eye(3), np.zeros(3), 1.0)
        transform = transform.detach().cpu().double().numpy()
        return cls(transform[:3, :3], transform[:3, 3], float(scale))

    def to_model(self, points: np.ndarray) -> np.ndarray:
        return self.scale * (points @ self.rotation.T + self.translation)

    def from_model(self, points: np.ndarray) -> np.ndarray:
        return (points / self.scale - self.translation) @ self.rotation


def camera_focus(cameras: Cameras) -> tuple[np.ndarray, float]:
    """The point nearest to every camera's optical axis (least squares), and half the distance from it to the
    nearest camera: the region the cameras look at, in the cameras' frame."""
    c2w = cameras.camera_to_worlds.detach().cpu().double().numpy()
    origins, axes = c2w[:, :, 3], -c2w[:, :, 2]  # OpenGL cameras look along -z
    axes /= np.linalg.norm(axes, axis=-1, keepdims=True)
    projectors = np.eye(3) - axes[:, :, None] * axes[:, None, :]  # onto the plane across each axis
    focus = np.linalg.lstsq(projectors.sum(0), np.einsum("nij,nj->i", projectors, origins), rcond=None)[0]
    return focus, 0.5 * float(np.linalg.norm(origins - focus, axis=-1).min())


def camera_region(
    cameras: Cameras, frame: Frame, scene_box: Optional[np.ndarray] = None
) -> tuple[np.ndarray, np.ndarray]:
    """The box the cameras look at, in ``frame``'s output coordinates: around their focus (:func:`camera_focus`), as
    wide as the nearest camera is far, cut to the model's ``scene_box`` (2x3, the model's frame) where given."""
    focus, radius = camera_focus(cameras)
    centre, half = frame.from_model(focus), radius / frame.scale
    bbox_min, bbox_max = centre - half, centre + half
    if scene_box is not None:
        corners = frame.from_model(scene_box)
        bbox_min, bbox_max = np.maximum(bbox_min, corners.min(0)), np.minimum(bbox_max, corners.max(0))
    return bbox_min, bbox_max


def samples_at(positions: Float[Tensor, "n 3"], directions: Float[Tensor, "n 3"]) -> RaySamples:
    """Zero-length ray samples at ``positions`` seen along ``directions`` (a field query at points), from camera 0
    (nerfacto's fields need a camera index; outside training they use the mean appearance embedding)."""
    zeros = torch.zeros_like(positions[..., :1])
    frustums = Frustums(origins=positions, directions=directions, starts=zeros, ends=zeros, pixel_area=zeros + 1)
    return RaySamples(frustums=frustums, camera_indices=zeros.long())


def cut_ground(mesh: trimesh.Trimesh, up: np.ndarray, focus: np.ndarray, side: float, tolerance: float):
    """``mesh`` less its ground, if any (the plane within :data:`GROUND_MAX_TILT` of ``up``, below ``focus``, holding
    the most vertices and spanning 80% of ``side``), and whether one was cut."""
    vertices = mesh.vertices
    if len(vertices) < 3:
        return mesh, False
    rng = np.random.default_rng(0)
    best = (0, None, None)
    for _ in range(256):
        a, b, c = vertices[rng.choice(len(vertices), 3, replace=False)]
        normal = np.cross(b - a, c - a)
        if np.linalg.norm(normal) == 0:
            continue
        normal = normal / np.linalg.norm(normal) * np.sign(normal @ up)
        if normal @ up < math.cos(GROUND_MAX_TILT):
            continue
        count = int((np.abs((vertices - a) @ normal) < tolerance).sum())
        if count > best[0]:
            best = (count, normal, a)
    count, normal, origin = best
    if normal is None or (focus - origin) @ normal <= tolerance:
        return mesh, False
    height = (vertices - origin) @ normal
    on_plane = vertices[np.abs(height) < tolerance]
    across = np.linalg.svd(np.eye(3) - np.outer(normal, normal))[0][:, :2]  # two directions along the plane
    spans = np.ptp(on_plane @ across, axis=0)
    if min(spans) < 0.8 * side:
        return mesh, False
    mesh = mesh.copy()
    mesh.update_faces((height[mesh.faces] > tolerance).all(axis=1))
    mesh.remove_unreferenced_vertices()
    return mesh, True


@torch.no_grad()
def density_mesh(
    field: Field,
    frame: Frame,
    bbox_min: Sequence[float],
    bbox_max: Sequence[float],
    resolution: int,
    threshold: float,
    min_component: float,
    up: Optional[np.ndarray] = None,
    batch_size: int = 1 << 16,
    device: torch.device | str = "cpu",
    report: Callable[[str], None] = print,
) -> trimesh.Trimesh:
    """The coloured ``threshold`` level set of the density on a ``resolution``-point grid of the box, in ``frame``,
    without pieces under ``min_component`` of the triangles or the ground (given ``up``); a level the density does
    not cross is a :class:`UsageError`."""
    rotation = torch.as_tensor(frame.rotation, dtype=torch.float32, device=device)
    translation = torch.as_tensor(frame.translation, dtype=torch.float32, device=device)

    def density(points: Tensor) -> Tensor:
        return field.density_fn(frame.scale * (points @ rotation.T + translation))[..., 0]

    grid = sample_grid(density, bbox_min, bbox_max, resolution, batch_size, device, "Sampling the density")
    report(f"density in the box: {grid.min():.3g} to {grid.max():.3g} (median {np.median(grid):.3g}); "
           f"surface at --threshold {threshold:g}")  # fmt: skip
    mesh = marching_cubes(grid, bbox_min, bbox_max, level=threshold, inside="above")
    if mesh.is_empty:
        raise UsageError(f"the density never reaches --threshold {threshold:g} in the box (it spans {grid.min():.3g} "
                         f"to {grid.max():.3g}): give a threshold inside that range, or train longer")  # fmt: skip
    side = float(np.min(np.subtract(bbox_max, bbox_min)))
    if up is not None:
        centre = 0.5 * (np.asarray(bbox_min) + np.asarray(bbox_max))
        mesh, cut = cut_ground(mesh, up, centre, side, tolerance=2 * side / (resolution - 1))
        if cut:
            report("cut away the ground (a flat surface across the box below its centre) and what lies under it")
    mesh = keep_components(mesh, min_component)
    if mesh.is_empty:
        raise UsageError("nothing is left of the mesh after the ground and the small pieces were cut; pass "
                         "--keep-ground or a lower --min-component")  # fmt: skip
    normals = torch.as_tensor(mesh.vertex_normals.copy(), dtype=torch.float32, device=device)  # outward
    points = torch.as_tensor(frame.to_model(mesh.vertices), dtype=torch.float32, device=device)
    colours = torch.cat([
        field.forward(samples_at(p, -n @ rotation.T))[FieldHeadNames.RGB].float()
        for p, n in zip(points.split(batch_size), normals.split(batch_size))
    ]).clamp(0, 1)  # fmt: skip
    mesh.visual.vertex_colors = (colours.cpu().numpy() * 255).round().astype(np.uint8)
    return mesh
