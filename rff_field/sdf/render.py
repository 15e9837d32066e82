"""Shaded pictures of meshes without a display: open3d ray casting, Lambertian shading, matplotlib for the page."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import open3d as o3d
import trimesh

from rff_field.common.outputs import new_figure, save_figure
from rff_field.sdf.data import raycasting_scene


def render_mesh(mesh: trimesh.Trimesh, view: tuple[float, float] = (35.0, 20.0), size: int = 384) -> np.ndarray:
    """An orthographic view ``[size, size, 3]`` of a mesh in [-0.5, 0.5]^3 from ``view`` (azimuth, elevation)."""
    image = np.ones((size, size, 3))
    if mesh.is_empty:
        return image
    azimuth, elevation = (math.radians(a) for a in view)
    forward = -np.array([math.sin(azimuth) * math.cos(elevation), math.sin(elevation),
                         math.cos(azimuth) * math.cos(elevation)])  # fmt: skip
    right = np.cross(forward, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    s = ((np.arange(size) + 0.5) / size - 0.5) * 1.05
    u, v = np.meshgrid(s, -s)
    origins = u[..., None] * right + v[..., None] * up - 2.0 * forward
    rays = np.concatenate([origins, np.broadcast_to(forward, origins.shape)], axis=-1).astype(np.float32)
    hits = raycasting_scene(mesh).cast_rays(o3d.core.Tensor(rays))
    hit = np.isfinite(hits["t_hit"].numpy())
    normals = hits["primitive_normals"].numpy()
    normals *= -np.sign(normals @ forward)[..., None]  # facing the camera: both sides lit
    light = -forward + 0.6 * up + 0.4 * right
    shade = 0.25 + 0.75 * np.clip(normals @ (light / np.linalg.norm(light)), 0, 1)
    image[hit] = shade[hit][:, None] * np.array([0.75, 0.78, 0.85])
    return image


def save_panels(panels: Sequence[tuple[str, np.ndarray]], path: Path, title: str) -> Path:
    """Pictures side by side with a caption each and a title, as a PNG."""
    figure, axes = new_figure(1, len(panels), figsize=(2.6 * len(panels), 3.1), squeeze=False)
    for ax, (caption, image) in zip(axes[0], panels):
        ax.imshow(image)
        ax.set_title(caption, fontsize=8)
        ax.axis("off")
    figure.suptitle(title, fontsize=10)
    save_figure(figure, path, dpi=110)
    return Path(path)
