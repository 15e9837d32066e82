"""Meshes of fields: sample a field on a box, marching cubes, keep the components of a useful size, write the mesh."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Literal, Optional, Sequence

import mcubes
import numpy as np
import torch
import trimesh
from jaxtyping import Float
from rich.console import Console
from rich.progress import Progress
from torch import Tensor

from rff_field.common.machine import check_memory
from rff_field.common.outputs import written_atomically
from rff_field.core.errors import UsageError

GRID_BYTES_PER_POINT = 16
"""Host memory a grid point takes in :func:`sample_grid` and :func:`marching_cubes`, with a margin."""
MIN_RESOLUTION = 8


def check_resolution(resolution: int, option: str = "--resolution") -> None:
    """Raise :class:`UsageError` naming ``option`` for a grid too coarse to show a shape or too large for memory."""
    if isinstance(resolution, bool) or not isinstance(resolution, int) or resolution < MIN_RESOLUTION:
        raise UsageError(f"{option} must be an integer of at least {MIN_RESOLUTION}, got {resolution!r}")
    check_memory(option, resolution, lambda side: GRID_BYTES_PER_POINT * side**3)


@torch.no_grad()
def sample_grid(
    field: Callable[[Float[Tensor, "n 3"]], Float[Tensor, " n"]],
    bbox_min: Sequence[float],
    bbox_max: Sequence[float],
    resolution: int,
    batch_size: int = 1 << 16,
    device: torch.device | str = "cpu",
    description: Optional[str] = None,
) -> Float[np.ndarray, "r r r"]:
    """``field`` on a ``resolution**3`` grid spanning the box, ``[ix, iy, iz]``, ``batch_size`` points a call."""
    axes = [torch.linspace(lo, hi, resolution, device=device) for lo, hi in zip(bbox_min, bbox_max)]
    values = torch.empty(resolution**3, dtype=torch.float32)
    total = resolution**3
    with Progress(console=Console(stderr=True), disable=description is None) as bar:
        task = bar.add_task(description or "", total=total)
        for start in range(0, total, batch_size):
            index = torch.arange(start, min(start + batch_size, total), device=device)
            ix, iy, iz = index // resolution**2, index // resolution % resolution, index % resolution
            points = torch.stack([axes[0][ix], axes[1][iy], axes[2][iz]], dim=-1)
            values[start : start + len(index)] = field(points).reshape(-1).float().cpu()
            bar.advance(task, len(index))
    return values.reshape((resolution,) * 3).numpy()


def marching_cubes(
    values: Float[np.ndarray, "x y z"],
    bbox_min: Sequence[float],
    bbox_max: Sequence[float],
    level: float = 0.0,
    inside: Literal["above", "below"] = "above",
) -> trimesh.Trimesh:
    """The isosurface at ``level`` in the box's coordinates (empty if the grid does not cross it), its triangles facing
    away from the ``inside`` (``above`` for a density, ``below`` for a signed distance)."""
    if not values.min() <= level <= values.max():
        return trimesh.Trimesh()
    vertices, faces = mcubes.marching_cubes(values.astype(np.float64), level)  # faces towards lower values
    lo, hi = np.asarray(bbox_min, dtype=np.float64), np.asarray(bbox_max, dtype=np.float64)
    vertices = lo + vertices * (hi - lo) / (np.asarray(values.shape) - 1)
    faces = faces if inside == "above" else faces[:, ::-1]
    return trimesh.Trimesh(vertices, faces, process=False)


def keep_components(mesh: trimesh.Trimesh, min_fraction: float = 0.0) -> trimesh.Trimesh:
    """The connected components with at least ``min_fraction`` of the mesh's triangles (0: all of them)."""
    if mesh.is_empty or min_fraction <= 0:
        return mesh
    labels = trimesh.graph.connected_component_labels(mesh.face_adjacency, node_count=len(mesh.faces))
    counts = np.bincount(labels)
    mesh = mesh.copy()
    mesh.update_faces(counts[labels] >= min_fraction * len(labels))
    mesh.remove_unreferenced_vertices()
    return mesh


def write_mesh(mesh: trimesh.Trimesh, path: Path, overwrite: bool = False) -> Path:
    """Write a non-empty mesh by its suffix (PLY keeps vertex colours), replacing a file only with ``overwrite``."""
    path = Path(path)
    if mesh.is_empty:
        raise UsageError(f"refusing to write an empty mesh to {path}")
    with written_atomically(path, overwrite) as temporary:
        mesh.export(temporary)
    return path
