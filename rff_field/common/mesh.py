"""Marching cubes on a field sampled over a box, and mesh I/O with open3d.

pymcubes and open3d are imported where they are used, so grid sampling, marching cubes (with scikit-image when
pymcubes is missing) and :func:`write_ply` also work on a machine that has neither.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from rff_field.common.outputs import written_atomically
from rff_field.common.progress import counted_progress
from rff_field.core.errors import UsageError

if TYPE_CHECKING:
    import open3d as o3d


@torch.no_grad()
def sample_grid(
    fn: Callable[[Float[Tensor, "n 3"]], Float[Tensor, " n"]],
    bbox_min: Sequence[float],
    bbox_max: Sequence[float],
    resolution: int,
    batch_size: int = 2**17,
    device: torch.device | str = "cpu",
    progress: Optional[str] = None,
) -> np.ndarray:
    """Evaluate ``fn`` on a ``resolution**3`` grid of points spanning the box, a slab at a time (with a progress
    bar described as ``progress``, when given).

    Returns:
        Array ``[R, R, R]`` indexed ``[ix, iy, iz]``.
    """
    axes = [torch.linspace(lo, hi, resolution, device=device) for lo, hi in zip(bbox_min, bbox_max)]
    values = np.empty((resolution,) * 3, dtype=np.float32)
    yz = torch.stack(torch.meshgrid(axes[1], axes[2], indexing="ij"), dim=-1).reshape(-1, 2)
    slabs = max(1, batch_size // yz.shape[0])
    with counted_progress() if progress is not None else contextlib.nullcontext() as bar:
        task = bar.add_task(progress, total=resolution) if bar is not None else None
        for start in range(0, resolution, slabs):
            xs = axes[0][start : start + slabs]
            pts = torch.cat([xs.repeat_interleave(yz.shape[0])[:, None], yz.repeat(len(xs), 1)], dim=-1)
            out = fn(pts).reshape(len(xs), resolution, resolution)
            values[start : start + len(xs)] = out.float().cpu().numpy()
            if bar is not None:
                bar.advance(task, len(xs))
    return values


def marching_cubes(
    values: np.ndarray, bbox_min: Sequence[float], bbox_max: Sequence[float], level: float = 0.0
) -> tuple[np.ndarray, np.ndarray]:
    """Isosurface of a grid (from :func:`sample_grid`) at ``level``, in the box's coordinates.

    Returns:
        Vertices ``[V, 3]`` and triangles ``[F, 3]``; both empty if the level is not crossed.
    """
    if not (values.min() <= level <= values.max()):
        return np.zeros((0, 3)), np.zeros((0, 3), dtype=np.int64)
    try:
        import mcubes
    except ImportError:  # e.g. a GPU machine without pymcubes: scikit-image's Lewiner marching cubes
        from skimage.measure import marching_cubes as skimage_marching_cubes

        verts, faces, _, _ = skimage_marching_cubes(values.astype(np.float64), level)
    else:
        verts, faces = mcubes.marching_cubes(values.astype(np.float64), level)
    lo, hi = np.asarray(bbox_min, dtype=np.float64), np.asarray(bbox_max, dtype=np.float64)
    verts = lo + verts * (hi - lo) / (np.asarray(values.shape) - 1)
    return verts, faces.astype(np.int64)


def to_open3d(
    vertices: np.ndarray, triangles: np.ndarray, colors: Optional[np.ndarray] = None
) -> o3d.geometry.TriangleMesh:
    """An open3d triangle mesh with vertex normals (and colours in [0, 1] if given)."""
    import open3d as o3d

    mesh = o3d.geometry.TriangleMesh(
        o3d.utility.Vector3dVector(np.asarray(vertices, dtype=np.float64)),
        o3d.utility.Vector3iVector(np.asarray(triangles, dtype=np.int32)),
    )
    if colors is not None:
        mesh.vertex_colors = o3d.utility.Vector3dVector(np.clip(np.asarray(colors, dtype=np.float64), 0, 1))
    mesh.compute_vertex_normals()
    return mesh


def keep_largest_component(mesh: o3d.geometry.TriangleMesh) -> o3d.geometry.TriangleMesh:
    """Drop every connected component but the one with the most triangles."""
    if len(mesh.triangles) == 0:
        return mesh
    labels, counts, _ = mesh.cluster_connected_triangles()
    labels = np.asarray(labels)
    mesh.remove_triangles_by_mask(labels != int(np.argmax(np.asarray(counts))))
    mesh.remove_unreferenced_vertices()
    return mesh


def write_mesh(mesh: o3d.geometry.TriangleMesh, path: Path, overwrite: bool = False) -> Path:
    """Write a PLY/OBJ/OFF/STL mesh; refuses to replace an existing file unless ``overwrite``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise UsageError(f"{path} already exists; choose another path or pass --overwrite")
    if len(mesh.triangles) == 0:
        raise UsageError(f"refusing to write an empty mesh to {path}: the level set was not found")
    path.parent.mkdir(parents=True, exist_ok=True)
    import open3d as o3d

    with written_atomically(path) as temporary:
        if not o3d.io.write_triangle_mesh(str(temporary), mesh):
            raise UsageError(f"open3d could not write {path}; check that its folder is writable and has space")
    return path


def signed_volume(vertices: np.ndarray, triangles: np.ndarray) -> float:
    """Volume enclosed by a closed mesh, positive when its triangles wind counter-clockwise seen from outside."""
    v = np.asarray(vertices, dtype=np.float64)[np.asarray(triangles)]
    return float(np.einsum("ij,ij->i", v[:, 0], np.cross(v[:, 1], v[:, 2])).sum() / 6.0)


def orient_outward(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """``triangles`` reordered, if needed, so that normals point out of the enclosed volume."""
    triangles = np.asarray(triangles)
    if len(triangles) and signed_volume(vertices, triangles) < 0:
        return triangles[:, ::-1].copy()
    return triangles


def write_ply(vertices: np.ndarray, triangles: np.ndarray, path: Path, overwrite: bool = False) -> Path:
    """Write a binary PLY with numpy alone (no open3d); refuses to replace a file unless ``overwrite``."""
    path = Path(path)
    if path.exists() and not overwrite:
        raise UsageError(f"{path} already exists; choose another path or pass --overwrite")
    vertices = np.ascontiguousarray(vertices, dtype="<f4")
    faces = np.empty(len(triangles), dtype=[("n", "u1"), ("idx", "<i4", (3,))])
    faces["n"], faces["idx"] = 3, np.asarray(triangles)
    header = (
        "ply\nformat binary_little_endian 1.0\n"
        f"element vertex {len(vertices)}\nproperty float x\nproperty float y\nproperty float z\n"
        f"element face {len(faces)}\nproperty list uchar int vertex_indices\nend_header\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with written_atomically(path) as temporary, open(temporary, "wb") as fh:
        fh.write(header.encode("ascii"))
        fh.write(vertices.tobytes())
        fh.write(faces.tobytes())
    return path
