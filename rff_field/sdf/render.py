"""Headless shaded renderings of meshes (open3d ray casting + Lambertian shading), saved as PNG with matplotlib.

Ray casting needs no display or GPU, so it works on any machine where open3d imports.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from rff_field.common.outputs import new_figure, save_figure

# A three-quarter view from the front-right, slightly above; the normalised shapes face +z.
DEFAULT_VIEW = (35.0, 20.0)


def render_mesh(
    vertices: np.ndarray,
    triangles: np.ndarray,
    size: int = 384,
    view: tuple[float, float] = DEFAULT_VIEW,
    extent: float = 1.0,
    color: Sequence[float] = (0.75, 0.78, 0.85),
) -> np.ndarray:
    """An orthographic, shaded RGB image ``[size, size, 3]`` in [0, 1] of a mesh in ``[-extent/2, extent/2]^3``.

    Args:
        vertices: ``[V, 3]``.
        triangles: ``[F, 3]``.
        size: Image side in pixels.
        view: Azimuth about +y and elevation, in degrees.
        extent: Side of the box that the image shows.
        color: Base colour of the surface.
    """
    import open3d as o3d

    image = np.ones((size, size, 3))
    if len(triangles) == 0:
        return image
    azimuth, elevation = (math.radians(a) for a in view)
    forward = -np.array(
        [math.sin(azimuth) * math.cos(elevation), math.sin(elevation), math.cos(azimuth) * math.cos(elevation)]
    )
    right = np.cross(forward, [0.0, 1.0, 0.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    s = (np.arange(size) + 0.5) / size - 0.5
    u, v = np.meshgrid(s * extent * 1.05, -s * extent * 1.05)
    origins = u[..., None] * right + v[..., None] * up - 2.0 * extent * forward
    rays = np.concatenate([origins, np.broadcast_to(forward, origins.shape)], axis=-1).astype(np.float32)

    scene = o3d.t.geometry.RaycastingScene()
    scene.add_triangles(
        o3d.core.Tensor(np.asarray(vertices, dtype=np.float32)), o3d.core.Tensor(np.asarray(triangles, np.uint32))
    )
    hits = scene.cast_rays(o3d.core.Tensor(rays))
    hit = np.isfinite(hits["t_hit"].numpy())
    normals = hits["primitive_normals"].numpy()
    normals = np.where((normals @ forward)[..., None] > 0, -normals, normals)  # light both sides
    light = -forward + 0.6 * up + 0.4 * right
    light /= np.linalg.norm(light)
    shade = 0.25 + 0.75 * np.clip(normals @ light, 0, 1)
    image[hit] = shade[hit][:, None] * np.asarray(color)
    return image


def save_panels(
    panels: Sequence[tuple[str, np.ndarray]], path: Path, columns: Optional[int] = None, title: Optional[str] = None
) -> Path:
    """Save images side by side (in rows of ``columns``) with a caption under each, as a PNG."""

    columns = columns or len(panels)
    rows = math.ceil(len(panels) / columns)
    fig, axes = new_figure(rows, columns, figsize=(2.6 * columns, 2.8 * rows + (0.3 if title else 0)), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, (caption, image) in zip(axes.flat, panels):
        ax.imshow(image)
        ax.set_title(caption, fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_figure(fig, path, dpi=110)
    return path
