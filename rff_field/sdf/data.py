"""Shapes for SDF regression: loading and checking meshes, BACON's normalisation and sampling, exact signed
distances from open3d's raycasting scene, a generated test shape, and precomputed sample pools.

The sampling follows the BACON repository (``dataio.MeshSDF``): each step draws surface points, perturbs half of
them with Laplace noise of scale ``coarse_scale`` (0.1) and half with ``fine_scale`` (1e-3), wraps points that
leave [-0.5, 0.5]^3 around to the other side, and regresses their signed distance (negative inside). BACON
estimates the distance from a point cloud with normals; here it is exact (distance to the triangles, sign from
ray parity of a watertight mesh), which is why meshes must be watertight.

open3d is imported lazily: a :class:`SamplePool` (an ``.npz`` written on a machine with open3d) needs only numpy
and torch, so a GPU machine without open3d can train from it.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Optional, Union

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from rff_field.common.progress import print_note
from rff_field.core.errors import UsageError

if TYPE_CHECKING:
    import manifold3d
    import open3d as o3d

MESH_SUFFIXES = (".ply", ".obj", ".off", ".stl")
POOL_FORMAT = 1


# ----------------------------------------------------------------------------------------------- mesh checks


def edge_counts(triangles: np.ndarray) -> tuple[int, int]:
    """Number of boundary edges (used by one triangle) and non-manifold edges (used by more than two)."""
    if len(triangles) == 0:
        return 0, 0
    edges = np.sort(np.asarray(triangles)[:, [[0, 1], [1, 2], [2, 0]]].reshape(-1, 2), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    return int((counts == 1).sum()), int((counts > 2).sum())


def is_closed(triangles: np.ndarray) -> bool:
    """Every edge is shared by exactly two triangles (a closed 2-manifold surface, possibly several)."""
    boundary, nonmanifold = edge_counts(triangles)
    return len(triangles) > 0 and boundary == 0 and nonmanifold == 0


def triangle_areas(vertices: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Area of every triangle."""
    v = np.asarray(vertices, dtype=np.float64)[np.asarray(triangles)]
    return 0.5 * np.linalg.norm(np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]), axis=-1)


def _clean(mesh: "o3d.geometry.TriangleMesh") -> "o3d.geometry.TriangleMesh":
    # STL and some OBJ writers repeat vertices per face; merge them so that edges are shared.
    mesh.remove_duplicated_vertices()
    mesh.remove_duplicated_triangles()
    mesh.remove_degenerate_triangles()
    mesh.remove_unreferenced_vertices()
    return mesh


def _fill_holes(mesh: "o3d.geometry.TriangleMesh", rounds: int = 8) -> "o3d.geometry.TriangleMesh":
    """Close holes with open3d's ``fill_holes``, repeated while boundary edges remain (one pass leaves some)."""
    import open3d as o3d

    for _ in range(rounds):
        if edge_counts(np.asarray(mesh.triangles))[0] == 0:
            break  # open3d's fill_holes crashes on a closed mesh
        # open3d's result can point into its input's memory: both stay alive until the legacy copy is made
        source = o3d.t.geometry.TriangleMesh.from_legacy(mesh)
        with _quiet_open3d():
            filled = source.fill_holes(hole_size=1e9)
        mesh = _clean(filled.to_legacy())
        del source, filled
    return mesh


def _solid(vertices: np.ndarray, triangles: np.ndarray) -> "manifold3d.Manifold":
    import manifold3d

    mesh = manifold3d.Mesh64(vert_properties=np.array(vertices, dtype=np.float64, order="C"),
                             tri_verts=np.array(triangles, dtype=np.uint64, order="C"))  # fmt: skip
    return manifold3d.Manifold(mesh)


def merge_overlapping_parts(
    mesh: "o3d.geometry.TriangleMesh", notify: Callable[[str], None]
) -> "o3d.geometry.TriangleMesh":
    """The union of a watertight mesh's closed parts where two of them overlap, less its cavities (inward-facing
    parts); else the mesh itself.

    Ray parity counts a point inside two parts (or a part inside another) as outside; the union is the solid the
    parts stand for. Meshes that manifold3d cannot read as manifold are returned unchanged.
    """
    import manifold3d
    import open3d as o3d

    whole = _solid(np.asarray(mesh.vertices), np.asarray(mesh.triangles))
    if whole.status() != manifold3d.Error.NoError:
        return mesh
    parts = whole.decompose()
    solids = [part for part in parts if part.volume() > 0]
    if len(solids) < 2:
        return mesh
    union = manifold3d.Manifold.batch_boolean(solids, manifold3d.OpType.Add)
    total = sum(part.volume() for part in solids)
    excess = total / union.volume() - 1
    if excess <= 1e-6:
        return mesh
    cavities = []
    for part in parts:
        if part.volume() < 0:
            inward = part.to_mesh64()
            cavities.append(_solid(inward.vert_properties[:, :3], inward.tri_verts[:, ::-1]))
    if cavities:
        union = manifold3d.Manifold.batch_boolean([union, *cavities], manifold3d.OpType.Subtract)
    notify(f"closed parts of the mesh overlap (the volumes of its {len(solids)} parts add up to {excess:.1%} more than "
           "their union), and ray parity would count the overlaps as outside; the fit uses the union")  # fmt: skip
    merged = union.to_mesh64()
    vertices = np.array(merged.vert_properties[:, :3], dtype=np.float64)
    triangles = np.array(merged.tri_verts, dtype=np.int32)
    return o3d.geometry.TriangleMesh(o3d.utility.Vector3dVector(vertices), o3d.utility.Vector3iVector(triangles))


def _read_obj(path: Path) -> "o3d.geometry.TriangleMesh":
    """An OBJ file with its faces split into triangles and its coordinates in float64, by trimesh (which nerfstudio
    depends on): open3d's reader skips faces of more than three corners and keeps about 7 digits."""
    import open3d as o3d
    import trimesh

    loaded = trimesh.load(path, force="mesh", process=False)
    return o3d.geometry.TriangleMesh(
        o3d.utility.Vector3dVector(np.asarray(loaded.vertices, dtype=np.float64)),
        o3d.utility.Vector3iVector(np.asarray(loaded.faces, dtype=np.int32)),
    )


def _count_points(path: Path) -> int:
    """Vertices in a file that holds no triangles: open3d's point-cloud reader (PLY), else OBJ ``v`` lines."""
    import open3d as o3d

    try:
        with _quiet_open3d():
            count = len(o3d.io.read_point_cloud(str(path)).points)
        if count == 0 and path.suffix.lower() == ".obj":
            with open(path, errors="replace") as fh:
                count = sum(1 for line in fh if line.startswith("v "))
        return count
    except Exception:
        return 0


@contextmanager
def _quiet_open3d() -> Iterator[None]:
    """Silence open3d's warnings and what its file readers print to stderr themselves (we raise our own errors)."""
    import open3d as o3d

    previous = o3d.utility.get_verbosity_level()
    o3d.utility.set_verbosity_level(o3d.utility.VerbosityLevel.Error)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        o3d.utility.set_verbosity_level(previous)


def load_mesh(
    path: Union[str, Path], fill_holes: bool = False, notify: Optional[Callable[[str], None]] = None
) -> "o3d.geometry.TriangleMesh":
    """Read a PLY/OBJ/OFF/STL triangle mesh, check that it bounds a volume, and merge closed parts that overlap
    (:func:`merge_overlapping_parts`).

    Args:
        path: The mesh file.
        fill_holes: Close holes (open3d's ``fill_holes``) before checking watertightness.
        notify: Receives one-line notices (parts merged); default: print them.

    Raises:
        UsageError: The file is missing, unreadable, empty, degenerate (no area or flat) or not watertight.
    """
    import open3d as o3d

    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{path} is a folder; give the path of a mesh file ({', '.join(MESH_SUFFIXES)})")
    if not path.is_file():
        raise UsageError(f"mesh file {path} does not exist; check the path")
    if path.suffix.lower() not in MESH_SUFFIXES:
        raise UsageError(f"{path} has suffix {path.suffix!r}; use a mesh in one of {', '.join(MESH_SUFFIXES)}")
    try:
        if path.suffix.lower() == ".obj":
            mesh = _read_obj(path)
        else:
            with _quiet_open3d():
                mesh = o3d.io.read_triangle_mesh(str(path))
    except Exception as err:  # open3d raises for some malformed files and returns an empty mesh for others
        raise UsageError(
            f"could not read {path} as a triangle mesh ({err}); check that the file is a valid mesh"
        ) from err
    if len(mesh.triangles) == 0:
        if path.stat().st_size == 0:
            raise UsageError(f"{path} is empty; give a mesh with triangles")
        points = len(mesh.vertices) or _count_points(path)
        if points:
            raise UsageError(f"{path} has {points} vertices but no triangles (a point cloud?); give a triangle mesh")
        raise UsageError(f"could not read any geometry from {path}; check that it is a valid {path.suffix} mesh")
    vertices = np.asarray(mesh.vertices)
    if not np.isfinite(vertices).all():
        raise UsageError(f"{path} has non-finite vertex coordinates; repair the mesh")
    mesh = _clean(mesh)
    area = float(triangle_areas(np.asarray(mesh.vertices), np.asarray(mesh.triangles)).sum())
    extent = np.ptp(np.asarray(mesh.vertices), axis=0) if len(mesh.vertices) else np.zeros(3)
    if len(mesh.triangles) == 0 or area <= 0:
        raise UsageError(f"{path} is degenerate: all its triangles have zero area; give a mesh with a surface")
    if extent.min() <= 1e-9 * max(extent.max(), 1e-30):
        raise UsageError(f"{path} is flat (extent {extent.tolist()}), so it bounds no volume; give a closed solid")
    (open_edges, nonmanifold_before), triangles = edge_counts(np.asarray(mesh.triangles)), len(mesh.triangles)
    filled, joints_only = mesh, False
    if open_edges and not nonmanifold_before:
        filled = _fill_holes(o3d.geometry.TriangleMesh(mesh))
        filled_area = float(triangle_areas(np.asarray(filled.vertices), np.asarray(filled.triangles)).sum())
        # Openings closed by triangles of no area are T-junctions (a vertex on another triangle's edge), not holes.
        joints_only = is_closed(np.asarray(filled.triangles)) and filled_area <= area * (1 + 1e-9)
    if joints_only and not fill_holes:
        raise UsageError(
            f"{path} has {open_edges} boundary edges at T-junctions (vertices on other triangles' edges, with no "
            "opening), which the watertightness check cannot follow; pass --fill-holes to join them (it adds only "
            "triangles of no area)"
        )
    if fill_holes:
        mesh = filled if filled is not mesh else _fill_holes(mesh)
    boundary, nonmanifold = edge_counts(np.asarray(mesh.triangles))
    if boundary or nonmanifold:
        what = f"{boundary} boundary edges (holes)" if boundary else f"{nonmanifold} non-manifold edges"
        hint = (
            "pass --fill-holes to close them, or repair it (e.g. with a watertight remesher)"
            if not fill_holes
            else "--fill-holes could not close them; repair it with a watertight remesher"
        )
        raise UsageError(
            f"{path} is not watertight: {what}, so inside and outside are undefined and signed distances would be "
            f"wrong; {hint}"
        )
    notify = notify or (lambda message: print_note(f"{path.name}: {message}"))
    if fill_holes and joints_only:
        notify(f"--fill-holes joined {open_edges} boundary edges at T-junctions with {len(mesh.triangles) - triangles} "
               "triangles of no area; the surface is unchanged")  # fmt: skip
    elif fill_holes and open_edges:
        notify(f"--fill-holes closed {open_edges} boundary edges with {len(mesh.triangles) - triangles} triangles; "
               "check the mesh if the openings were meant to be there")  # fmt: skip
    return merge_overlapping_parts(mesh, notify)


# --------------------------------------------------------------------------------------------- normalisation


@dataclass(frozen=True)
class Normalization:
    """``x_normalised = (x - center) * scale + offset``, BACON's map into [-0.45, 0.45]."""

    center: tuple[float, float, float]
    scale: float
    offset: float

    def apply(self, points: np.ndarray) -> np.ndarray:
        return (np.asarray(points, dtype=np.float64) - np.asarray(self.center)) * self.scale + self.offset

    def as_dict(self) -> dict:
        """For metrics.json: a point of the mesh is ``(x - offset) / scale + center``, a distance ``d / scale``."""
        return {"center": list(self.center), "scale": self.scale, "offset": self.offset}

    def to_array(self) -> np.ndarray:
        """``[center, scale, offset]`` as float64, for a sample pool."""
        return np.array([*self.center, self.scale, self.offset], dtype=np.float64)

    @classmethod
    def from_array(cls, values: np.ndarray) -> "Normalization":
        cx, cy, cz, scale, offset = (float(v) for v in values)
        return cls((cx, cy, cz), scale, offset)


def bacon_normalization(vertices: np.ndarray) -> Normalization:
    """BACON's ``MeshSDF.normalize``: centre on the vertex mean, then one scale for all axes so that the global
    minimum and maximum coordinate map to -0.45 and 0.45."""
    vertices = np.asarray(vertices, dtype=np.float64)
    center = vertices.mean(axis=0)
    centred = vertices - center
    lo, hi = float(centred.min()), float(centred.max())
    scale = 0.9 / (hi - lo)
    return Normalization(tuple(float(c) for c in center), scale, -0.45 - lo * scale)


def normalize_mesh(mesh: "o3d.geometry.TriangleMesh") -> tuple["o3d.geometry.TriangleMesh", Normalization]:
    """A copy of ``mesh`` moved into BACON's normalised space, and the map used."""
    import open3d as o3d

    norm = bacon_normalization(np.asarray(mesh.vertices))
    out = o3d.geometry.TriangleMesh(mesh)
    out.vertices = o3d.utility.Vector3dVector(norm.apply(np.asarray(mesh.vertices)))
    out.compute_vertex_normals()
    return out, norm


def generated_shape(subdivisions: int = 5) -> "o3d.geometry.TriangleMesh":
    """A watertight bumpy sphere (an icosphere displaced along its normals), the default shape of ``fit``.

    The displacement is a smooth function of the unit normal with detail at a few frequencies, so a fit has
    something to learn, and its SDF needs no data files.
    """
    import open3d as o3d

    sphere = o3d.geometry.TriangleMesh.create_icosahedron(radius=1.0).subdivide_loop(subdivisions)
    v = np.asarray(sphere.vertices)
    v = v / np.linalg.norm(v, axis=-1, keepdims=True)
    x, y, z = v.T
    radius = 1 + 0.12 * np.sin(3 * x + 1) * np.cos(3 * y) + 0.06 * np.sin(6 * z + 2 * x) + 0.03 * np.cos(11 * y)
    sphere.vertices = o3d.utility.Vector3dVector(v * radius[:, None])
    sphere.compute_vertex_normals()
    return _clean(sphere)


GENERATED_SHAPE = "generated"
"""The name of the shape used when no mesh is given (:func:`generated_shape`)."""


def load_shape(
    path: Optional[Union[str, Path]], fill_holes: bool = False, notify: Optional[Callable[[str], None]] = None
) -> tuple[str, "o3d.geometry.TriangleMesh", Normalization]:
    """A shape's name, its checked mesh in BACON's normalised space and the map from the file's units; ``None``
    gives the generated shape."""
    try:
        import open3d  # noqa: F401
    except ImportError:
        raise UsageError(
            "sampling a shape needs open3d, which is not installed here; install it, or write a sample "
            "pool where it is (`rff-sdf pool`) and train from that (--pool / --pools)"
        ) from None
    if path is None:
        mesh, normalization = normalize_mesh(generated_shape())
        return GENERATED_SHAPE, mesh, normalization
    mesh, normalization = normalize_mesh(load_mesh(path, fill_holes=fill_holes, notify=notify))
    return Path(path).stem, mesh, normalization


def sphere_mesh(radius: float = 0.35, subdivisions: int = 5) -> "o3d.geometry.TriangleMesh":
    """An icosphere of ``radius`` centred at the origin (for tests of signs and of marching cubes)."""
    import open3d as o3d

    sphere = o3d.geometry.TriangleMesh.create_icosahedron(radius=1.0).subdivide_loop(subdivisions)
    v = np.asarray(sphere.vertices)
    sphere.vertices = o3d.utility.Vector3dVector(radius * v / np.linalg.norm(v, axis=-1, keepdims=True))
    sphere.compute_vertex_normals()
    return _clean(sphere)


# ------------------------------------------------------------------------------------------------- sampling


def sample_surface(
    vertices: np.ndarray, triangles: np.ndarray, n: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points uniformly distributed over the surface by area, with the unit normals of their triangles."""
    vertices = np.asarray(vertices, dtype=np.float64)
    triangles = np.asarray(triangles)
    areas = triangle_areas(vertices, triangles)
    faces = rng.choice(len(triangles), size=n, p=areas / areas.sum())
    u, v = rng.random(n), rng.random(n)
    flip = u + v > 1
    u[flip], v[flip] = 1 - u[flip], 1 - v[flip]
    a, b, c = (vertices[triangles[faces, k]] for k in range(3))
    points = a + u[:, None] * (b - a) + v[:, None] * (c - a)
    normals = np.cross(b - a, c - a)
    normals /= np.maximum(np.linalg.norm(normals, axis=-1, keepdims=True), 1e-30)
    return points, normals


def perturb(
    surface: np.ndarray, scale: float, rng: np.random.Generator, bound: float = 0.5
) -> Float[np.ndarray, "n 3"]:
    """Add Laplace noise of ``scale`` and wrap points leaving ``[-bound, bound]^3`` around (as BACON does)."""
    points = surface + rng.laplace(scale=scale, size=surface.shape)
    return (points + bound) % (2 * bound) - bound


@dataclass
class SDFBatch:
    """One step's training samples: coarse (widely perturbed) then fine (near-surface) points."""

    points: Float[Tensor, "n 3"]
    sdf: Float[Tensor, " n"]
    num_coarse: int

    def to(self, device: Union[str, torch.device]) -> "SDFBatch":
        return SDFBatch(self.points.to(device), self.sdf.to(device), self.num_coarse)


class MeshSDF:
    """Exact signed distances to a watertight mesh in normalised space, and BACON-style sample batches.

    Args:
        mesh: A watertight triangle mesh, already normalised (see :func:`normalize_mesh`).
        coarse_scale: Laplace scale of the coarse half of each batch.
        fine_scale: Laplace scale of the fine half.
        seed: Seed of the sampling.
        sign_rays: Rays cast per query point to vote on inside/outside (odd; more is more robust).
    """

    def __init__(
        self,
        mesh: "o3d.geometry.TriangleMesh",
        coarse_scale: float = 0.1,
        fine_scale: float = 1e-3,
        seed: int = 0,
        sign_rays: int = 1,
    ) -> None:
        import open3d as o3d

        self.vertices = np.asarray(mesh.vertices, dtype=np.float64)
        self.triangles = np.asarray(mesh.triangles, dtype=np.int64)
        self.coarse_scale, self.fine_scale = coarse_scale, fine_scale
        self.sign_rays = sign_rays
        self.rng = np.random.default_rng(seed)
        self._scene = o3d.t.geometry.RaycastingScene()
        self._scene.add_triangles(
            o3d.core.Tensor(self.vertices.astype(np.float32)), o3d.core.Tensor(self.triangles.astype(np.uint32))
        )

    def signed_distance(self, points: np.ndarray, chunk: int = 1 << 18) -> np.ndarray:
        """Signed distance (negative inside) of every point."""
        import open3d as o3d

        points = np.asarray(points, dtype=np.float32).reshape(-1, 3)
        out = np.empty(len(points), dtype=np.float32)
        for start in range(0, len(points), chunk):
            query = o3d.core.Tensor(np.ascontiguousarray(points[start : start + chunk]))
            out[start : start + chunk] = self._scene.compute_signed_distance(query, nsamples=self.sign_rays).numpy()
        return out

    def sample_points(self, n: int) -> tuple[np.ndarray, int]:
        """``n`` BACON samples (``n // 2`` coarse first, then fine) and the number of coarse ones."""
        surface, _ = sample_surface(self.vertices, self.triangles, n, self.rng)
        num_coarse = n // 2
        coarse = perturb(surface[:num_coarse], self.coarse_scale, self.rng)
        fine = perturb(surface[num_coarse:], self.fine_scale, self.rng)
        return np.concatenate([coarse, fine]).astype(np.float32), num_coarse

    def sample(self, n: int) -> SDFBatch:
        """A fresh batch of ``n`` samples with exact signed distances."""
        points, num_coarse = self.sample_points(n)
        sdf = self.signed_distance(points)
        return SDFBatch(torch.from_numpy(points), torch.from_numpy(sdf), num_coarse)

    def state(self) -> dict:
        """Where the sampling stands (for a checkpoint)."""
        return {"rng": self.rng.bit_generator.state}

    def load_state(self, state: dict) -> None:
        """Go on sampling from a :meth:`state`."""
        self.rng.bit_generator.state = state["rng"]

    def surface_samples(self, n: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
        """``n`` surface points and normals for evaluation (own seed, independent of training)."""
        return sample_surface(self.vertices, self.triangles, n, np.random.default_rng(seed))


# ---------------------------------------------------------------------------------------------------- pools


POOL_ARRAYS = ("coarse_points", "coarse_sdf", "fine_points", "fine_sdf", "surface_points", "surface_normals",
               "vertices", "triangles")  # fmt: skip
"""The arrays of a sample pool that training and measuring read (``rff-sdf pool`` writes them, with metadata)."""


def missing_pool_arrays(names: Iterable[str]) -> list[str]:
    """The arrays of :data:`POOL_ARRAYS` not among ``names``."""
    names = set(names)
    return [name for name in POOL_ARRAYS if name not in names]


def check_pool_arrays(path: Union[str, Path], names: Iterable[str]) -> None:
    """Raise :class:`UsageError` naming what the pool at ``path`` lacks when ``names`` (its arrays) are not all of
    :data:`POOL_ARRAYS`."""
    missing = missing_pool_arrays(names)
    if missing:
        raise UsageError(f"{path} is not a complete sample pool (it lacks {', '.join(missing)}); write it again with "
                         "`rff-sdf pool`")  # fmt: skip


class SamplePool:
    """Precomputed BACON samples with exact SDFs (an ``.npz``), drawn from without open3d.

    Each step takes ``n // 2`` coarse and ``n - n // 2`` fine samples in the order of a random permutation, so a
    pool of ``steps * n`` samples gives every step fresh samples; a smaller pool is reused (reshuffled) once
    exhausted. The pool also holds the ground-truth surface samples used for the metrics.

    Args:
        arrays: ``coarse_points``, ``coarse_sdf``, ``fine_points``, ``fine_sdf``, ``surface_points``,
            ``surface_normals`` (and metadata).
        device: Where to keep the pool (a GPU keeps the draws on the device).
        seed: Seed of the permutations.
    """

    def __init__(self, arrays: dict, device: Union[str, torch.device] = "cpu", seed: int = 0) -> None:
        missing = missing_pool_arrays(arrays)
        if missing:
            raise UsageError(f"sample pool lacks {', '.join(missing)}; write it again with `rff-sdf pool`")
        self.device = torch.device(device)
        self.coarse = (self._t(arrays["coarse_points"]), self._t(arrays["coarse_sdf"]))
        self.fine = (self._t(arrays["fine_points"]), self._t(arrays["fine_sdf"]))
        self.surface_points = np.asarray(arrays["surface_points"], dtype=np.float64)
        self.surface_normals = np.asarray(arrays["surface_normals"], dtype=np.float64)
        self.meta = {k: arrays[k].item() for k in ("name", "coarse_scale", "fine_scale") if k in arrays}
        self._generator = torch.Generator(device=self.device).manual_seed(seed)
        self._order: dict[str, Tensor] = {}
        self._cursor: dict[str, int] = {"coarse": 0, "fine": 0}

    def _t(self, array: np.ndarray) -> Tensor:
        return torch.as_tensor(np.asarray(array, dtype=np.float32), device=self.device)

    def __len__(self) -> int:
        return len(self.coarse[1]) + len(self.fine[1])

    @classmethod
    def load(cls, path: Union[str, Path], device: Union[str, torch.device] = "cpu", seed: int = 0) -> "SamplePool":
        path = Path(path)
        if not path.is_file():
            raise UsageError(f"sample pool {path} does not exist; write one with `rff-sdf pool`")
        try:
            with np.load(path, allow_pickle=False) as data:
                arrays = {k: data[k] for k in data.files}
        except Exception as err:
            raise UsageError(f"could not read sample pool {path} ({err}); write it again with `rff-sdf pool`") from err
        check_pool_arrays(path, arrays)
        return cls(arrays, device=device, seed=seed)

    def _take(self, which: str, n: int) -> tuple[Tensor, Tensor]:
        points, sdf = self.coarse if which == "coarse" else self.fine
        size = len(sdf)
        chunks, needed = [], n
        while needed > 0:
            if which not in self._order or self._cursor[which] >= size:
                self._order[which] = torch.randperm(size, generator=self._generator, device=self.device)
                self._cursor[which] = 0
            start = self._cursor[which]
            stop = min(size, start + needed)
            chunks.append(self._order[which][start:stop])
            self._cursor[which] = stop
            needed -= stop - start
        idx = torch.cat(chunks)
        return points[idx], sdf[idx]

    def state(self) -> dict:
        """Where the sampling stands (for a checkpoint)."""
        return {
            "generator": self._generator.get_state(),
            "order": {which: order.cpu() for which, order in self._order.items()},
            "cursor": dict(self._cursor),
        }

    def load_state(self, state: dict) -> None:
        """Go on sampling from a :meth:`state`."""
        self._generator.set_state(state["generator"])
        self._order = {which: order.to(self.device) for which, order in state["order"].items()}
        self._cursor = dict(state["cursor"])

    def sample(self, n: int) -> SDFBatch:
        """The next ``n`` samples: ``n // 2`` coarse, then fine."""
        num_coarse = n // 2
        cp, cs = self._take("coarse", num_coarse)
        fp, fs = self._take("fine", n - num_coarse)
        return SDFBatch(torch.cat([cp, fp]), torch.cat([cs, fs]), num_coarse)


def build_pool(
    shape: MeshSDF,
    size: int,
    name: str,
    surface_samples: int = 100_000,
    chunk: int = 1 << 18,
    progress: Optional[Callable[[int], None]] = None,
    normalization: Optional[Normalization] = None,
) -> dict:
    """Arrays for a :class:`SamplePool` of ``size`` samples (half coarse, half fine) of ``shape``.

    Args:
        shape: The mesh's SDF and sampler.
        size: Total number of samples.
        name: Name of the shape (stored with the pool).
        surface_samples: Ground-truth surface points for the metrics.
        chunk: Samples computed at a time.
        progress: Called with the number of samples added after every chunk.
        normalization: The map from the mesh file's units, kept with the pool for the runs' metrics.
    """
    num_coarse = size // 2
    arrays = {
        "coarse_points": np.empty((num_coarse, 3), np.float32),
        "coarse_sdf": np.empty(num_coarse, np.float32),
        "fine_points": np.empty((size - num_coarse, 3), np.float32),
        "fine_sdf": np.empty(size - num_coarse, np.float32),
    }
    for kind, total in (("coarse", num_coarse), ("fine", size - num_coarse)):
        scale = shape.coarse_scale if kind == "coarse" else shape.fine_scale
        for start in range(0, total, chunk):
            n = min(chunk, total - start)
            surface, _ = sample_surface(shape.vertices, shape.triangles, n, shape.rng)
            p = perturb(surface, scale, shape.rng).astype(np.float32)
            arrays[f"{kind}_points"][start : start + n] = p
            arrays[f"{kind}_sdf"][start : start + n] = shape.signed_distance(p)
            if progress is not None:
                progress(n)
    surface_points, surface_normals = shape.surface_samples(surface_samples)
    return {
        "format": np.array(POOL_FORMAT),
        "name": np.array(name),
        "coarse_scale": np.array(shape.coarse_scale),
        "fine_scale": np.array(shape.fine_scale),
        **arrays,
        "surface_points": surface_points.astype(np.float32),
        "surface_normals": surface_normals.astype(np.float32),
        "vertices": shape.vertices.astype(np.float32),
        "triangles": shape.triangles.astype(np.int32),
        **({"normalization": normalization.to_array()} if normalization is not None else {}),
    }


def pool_size_for(iters: int, points_per_step: int) -> int:
    """Samples needed so that every step of a run sees fresh ones."""
    return int(iters) * int(points_per_step)
