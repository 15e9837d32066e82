"""Shapes for SDF regression with BACON's protocol: a watertight mesh, BACON's normalisation, and BACON's training
samples with exact signed distances (BACON estimates them from points; exact ones need a watertight mesh)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import open3d as o3d
import torch
import trimesh
from jaxtyping import Float
from torch import Tensor

from rff_field.core.errors import UsageError

MESH_SUFFIXES = (".ply", ".obj", ".off", ".stl")


def raycasting_scene(mesh: trimesh.Trimesh) -> o3d.t.geometry.RaycastingScene:
    """open3d's scene for distances to and rays onto the mesh's triangles."""
    scene = o3d.t.geometry.RaycastingScene()
    vertices, faces = o3d.core.Tensor(mesh.vertices.astype(np.float32)), o3d.core.Tensor(mesh.faces.astype(np.uint32))
    scene.add_triangles(vertices, faces)
    return scene


def _fill_holes(mesh: trimesh.Trimesh, rounds: int = 8) -> trimesh.Trimesh:
    """open3d's ``fill_holes``, repeated while the mesh is open (one pass can leave some holes)."""
    for _ in range(rounds):
        if mesh.is_watertight:
            break
        tensor = o3d.t.geometry.TriangleMesh(o3d.core.Tensor(mesh.vertices), o3d.core.Tensor(mesh.faces))
        filled = tensor.fill_holes(hole_size=1e9)
        mesh = trimesh.Trimesh(filled.vertex.positions.numpy(), filled.triangle.indices.numpy())
    return mesh


def load_mesh(path: Path, fill_holes: bool = False) -> trimesh.Trimesh:
    """A PLY/OBJ/OFF/STL triangle mesh that bounds a volume (its holes closed first with ``fill_holes``); bad geometry
    is a :class:`UsageError` naming the file, not repaired."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"mesh file {path} does not exist")
    if path.suffix.lower() not in MESH_SUFFIXES:
        raise UsageError(f"{path}: use a mesh in one of {', '.join(MESH_SUFFIXES)}")
    try:
        mesh = trimesh.load(path, force="mesh", process=False)  # processing would drop non-finite vertices silently
    except Exception as err:  # each format's reader raises its own errors
        raise UsageError(f"could not read {path} as a triangle mesh ({type(err).__name__})") from None
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0:
        raise UsageError(f"{path} holds no triangles; give a triangle mesh")
    vertices, faces = np.asarray(mesh.vertices, dtype=np.float64), np.asarray(mesh.faces)
    if not np.isfinite(vertices).all():
        raise UsageError(f"{path} has non-finite vertex coordinates (NaN or infinity)")
    if faces.min() < 0 or faces.max() >= len(vertices):
        raise UsageError(f"{path} has triangles whose vertex indices are out of range")
    extent = float(np.ptp(vertices, axis=0).max())
    if not 0 < extent < 1e30:
        raise UsageError(f"{path} spans {extent:g} units; give a mesh of a finite, non-zero size")
    mesh = trimesh.Trimesh(vertices, faces)  # repeated vertices merged
    degenerate = int((mesh.area_faces <= 1e-12 * extent**2).sum())
    if degenerate:
        raise UsageError(f"{path} has {degenerate} degenerate triangle(s) (of zero area); repair it")
    if fill_holes:
        mesh = _fill_holes(mesh)
    if not mesh.is_watertight:
        hint = "repair it" if fill_holes else "pass --fill-holes to close it, or repair it"
        raise UsageError(f"{path} is not watertight, so it has no inside; {hint}")
    mesh.fix_normals()  # consistent winding, facing out
    if mesh.volume <= 1e-9 * extent**3:
        raise UsageError(f"{path} encloses no volume (flat or degenerate)")
    return mesh


def generated_shape() -> trimesh.Trimesh:
    """A watertight bumpy sphere: an icosphere displaced along its normals by a few smooth waves (no data needed)."""
    sphere = trimesh.creation.icosphere(subdivisions=5)
    x, y, z = sphere.vertices.T
    radius = 1 + 0.12 * np.sin(3 * x + 1) * np.cos(3 * y) + 0.06 * np.sin(6 * z + 2 * x) + 0.03 * np.cos(11 * y)
    return trimesh.Trimesh(sphere.vertices * radius[:, None], sphere.faces)


@dataclass(frozen=True)
class Normalization:
    """BACON's map into its unit space, ``x_unit = (x - center) * scale + offset`` (the shape in [-0.45, 0.45]^3)."""

    center: tuple[float, float, float]
    scale: float
    offset: float

    @classmethod
    def of(cls, vertices: Float[np.ndarray, "v 3"]) -> Normalization:
        """BACON's ``MeshSDF.normalize``: centred on the vertex mean, one scale mapping the extremes to -0.45, 0.45."""
        center = np.asarray(vertices, dtype=np.float64).mean(axis=0)
        lo, hi = float((vertices - center).min()), float((vertices - center).max())
        scale = 0.9 / (hi - lo)
        return cls(tuple(center.tolist()), scale, -0.45 - lo * scale)

    def to_unit(self, points: Float[np.ndarray, "n 3"]) -> Float[np.ndarray, "n 3"]:
        return (np.asarray(points, dtype=np.float64) - self.center) * self.scale + self.offset

    def from_unit(self, points: Float[np.ndarray, "n 3"]) -> Float[np.ndarray, "n 3"]:
        return (np.asarray(points, dtype=np.float64) - self.offset) / self.scale + self.center


def load_shape(path: Optional[Path], fill_holes: bool = False) -> tuple[trimesh.Trimesh, Normalization]:
    """The mesh at ``path`` (None: :func:`generated_shape`) in BACON's unit space, and the map from its own units."""
    mesh = generated_shape() if path is None else load_mesh(path, fill_holes)
    normalization = Normalization.of(mesh.vertices)
    return trimesh.Trimesh(normalization.to_unit(mesh.vertices), mesh.faces, process=False), normalization


class ShapeSampler:
    """Exact signed distances to a watertight mesh in BACON's unit space, and BACON's training samples: surface points
    moved by Laplace noise of ``coarse_scale`` (half) and ``fine_scale``, wrapped into [-0.5, 0.5]^3."""

    def __init__(self, mesh: trimesh.Trimesh, coarse_scale: float = 0.1, fine_scale: float = 1e-3, seed: int = 0):
        self.mesh = mesh
        self.coarse_scale, self.fine_scale = coarse_scale, fine_scale
        self.rng = np.random.default_rng(seed)
        self.scene = raycasting_scene(mesh)

    def signed_distance(self, points: Float[np.ndarray, "n 3"]) -> Float[np.ndarray, " n"]:
        """Distance to the surface, negative inside (the sign by ray parity)."""
        query = o3d.core.Tensor(np.ascontiguousarray(points, dtype=np.float32))
        return self.scene.compute_signed_distance(query).numpy()

    def sample(self, n: int) -> tuple[Float[Tensor, "n 3"], Float[Tensor, " n"]]:
        """``n`` samples, the coarse ``n // 2`` first, and their signed distances."""
        surface, _ = trimesh.sample.sample_surface(self.mesh, n, seed=self.rng)
        scales = np.where(np.arange(n) < n // 2, self.coarse_scale, self.fine_scale)[:, None]
        points = surface + self.rng.laplace(size=(n, 3)) * scales
        points = ((points + 0.5) % 1.0 - 0.5).astype(np.float32)
        return torch.from_numpy(points), torch.from_numpy(self.signed_distance(points))
