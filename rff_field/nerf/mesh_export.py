"""A coloured triangle mesh from the density field of a trained ``rff-nerf`` or ``rff-nerfacto`` model.

Marching cubes (pymcubes) on the density sampled over a box, vertex colours from the field looking at each
vertex from outside (along the negative normal), and only the largest connected component kept.
"""

from __future__ import annotations

from typing import Optional, Sequence

import numpy as np
import open3d as o3d
import torch
from jaxtyping import Float
from nerfstudio.cameras.rays import Frustums, RaySamples
from nerfstudio.field_components.field_heads import FieldHeadNames
from nerfstudio.fields.base_field import Field
from torch import Tensor

from rff_field.common.mesh import keep_largest_component, marching_cubes, sample_grid, to_open3d
from rff_field.core.errors import UsageError


class EmptyMeshError(UsageError):
    """The density never crosses the threshold inside the box."""


def samples_at(positions: Float[Tensor, "n 3"], directions: Float[Tensor, "n 3"]) -> RaySamples:
    """Zero-length ray samples at ``positions`` seen along ``directions`` (a field query at points), from camera 0
    (nerfacto's fields need a camera index; outside training they use the mean appearance embedding)."""
    zeros = torch.zeros_like(positions[..., :1])
    return RaySamples(
        frustums=Frustums(
            origins=positions,
            directions=directions,
            starts=zeros,
            ends=zeros,
            pixel_area=torch.ones_like(zeros),
        ),
        camera_indices=torch.zeros_like(zeros, dtype=torch.long),
    )


@torch.no_grad()
def field_colours(
    field: Field,
    points: np.ndarray,
    directions: np.ndarray,
    batch_size: int = 2**16,
    device: torch.device | str = "cpu",
) -> np.ndarray:
    """Colour ``[n, 3]`` the field emits at ``points`` towards a viewer looking along ``directions``."""
    out = np.zeros((len(points), 3), dtype=np.float64)
    for start in range(0, len(points), batch_size):
        pos = torch.as_tensor(points[start : start + batch_size], dtype=torch.float32, device=device)
        dirs = torch.as_tensor(directions[start : start + batch_size], dtype=torch.float32, device=device)
        dirs = torch.nn.functional.normalize(dirs, dim=-1)
        outputs = field.forward(samples_at(pos, dirs))
        out[start : start + len(pos)] = outputs[FieldHeadNames.RGB].float().cpu().numpy()
    return out


@torch.no_grad()
def _orient_outward(field: Field, mesh: o3d.geometry.TriangleMesh, step: float, device, samples: int = 2048) -> None:
    """Flip the triangles if the normals point into the dense side (the winding depends on the marching cubes)."""
    vertices, normals = np.asarray(mesh.vertices), np.asarray(mesh.vertex_normals)
    pick = np.random.default_rng(0).choice(len(vertices), size=min(samples, len(vertices)), replace=False)
    v = torch.as_tensor(vertices[pick], dtype=torch.float32, device=device)
    n = torch.as_tensor(normals[pick], dtype=torch.float32, device=device)
    outside = field.density_fn(v + step * n)[..., 0]
    inside = field.density_fn(v - step * n)[..., 0]
    if (outside > inside).float().mean() > 0.5:
        mesh.triangles = o3d.utility.Vector3iVector(np.asarray(mesh.triangles)[:, ::-1].copy())
        mesh.compute_vertex_normals()


@torch.no_grad()
def density_mesh(
    field: Field,
    bbox_min: Sequence[float],
    bbox_max: Sequence[float],
    resolution: int = 256,
    threshold: float = 10.0,
    keep_largest: bool = True,
    batch_size: int = 2**16,
    device: torch.device | str = "cpu",
    density_grid: Optional[np.ndarray] = None,
) -> o3d.geometry.TriangleMesh:
    """The ``threshold`` level set of the field's density, with vertex colours from the field.

    Args:
        field: The NeRF field (the fine one for the best detail).
        bbox_min: Lower corner of the box to mesh.
        bbox_max: Upper corner of the box to mesh.
        resolution: Grid points per side.
        threshold: Density of the surface.
        keep_largest: Keep only the largest connected component.
        batch_size: Points per forward pass.
        device: Where the field runs.
        density_grid: A grid already sampled from the same field and box (skips the sampling).

    Raises:
        EmptyMeshError: The density does not cross ``threshold`` in the box.
    """
    if density_grid is None:
        density_grid = sample_grid(
            lambda x: field.density_fn(x)[..., 0], bbox_min, bbox_max, resolution, batch_size, device
        )
    lo, hi = float(density_grid.min()), float(density_grid.max())
    vertices, triangles = marching_cubes(density_grid, bbox_min, bbox_max, level=threshold)
    if len(triangles) == 0 and not hi > lo:
        raise EmptyMeshError(
            f"the density is {lo:.3g} everywhere in the box: the field is empty there (undertrained, or the box "
            "misses the scene); train longer, or give --bbox-min/--bbox-max around the object"
        )
    if len(triangles) == 0 and hi < 2 * lo:  # a threshold inside so flat a range would mesh noise
        raise EmptyMeshError(
            f"the density never crosses --threshold {threshold:g} in the box and hardly varies there (it spans "
            f"{lo:.3g} to {hi:.3g}): the field has no surface yet (undertrained, or the box misses the scene); "
            "train longer, or give --bbox-min/--bbox-max around the object"
        )
    if len(triangles) == 0:
        raise EmptyMeshError(
            f"the density never crosses --threshold {threshold:g} in the box (it spans {lo:.3g} to {hi:.3g}); "
            "choose a threshold inside that range, or check that --bbox-min/--bbox-max hold the object"
        )
    mesh = to_open3d(vertices, triangles)
    if keep_largest:
        mesh = keep_largest_component(mesh)
        mesh.compute_vertex_normals()
    _orient_outward(field, mesh, step=0.5 * float(np.min(np.subtract(bbox_max, bbox_min))) / resolution, device=device)
    normals = np.asarray(mesh.vertex_normals)  # outward: look at each vertex from outside
    colours = field_colours(field, np.asarray(mesh.vertices), -normals, batch_size, device)
    mesh.vertex_colors = o3d.utility.Vector3dVector(np.clip(colours, 0, 1))
    return mesh
