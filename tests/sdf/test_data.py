"""Shapes for SDF regression: mesh checks and their errors, normalisation, exact signed distances, pools."""

import numpy as np
import open3d as o3d
import pytest

from rff_field.bench.sdf import check_pool
from rff_field.sdf.data import (
    MeshSDF,
    SamplePool,
    UsageError,
    bacon_normalization,
    build_pool,
    edge_counts,
    generated_shape,
    is_closed,
    load_mesh,
    load_shape,
    sphere_mesh,
    triangle_areas,
)


@pytest.fixture(scope="module")
def sphere_sdf():
    return MeshSDF(sphere_mesh(0.35, subdivisions=5), seed=0)


def _write(mesh, path):
    mesh.compute_triangle_normals()
    assert o3d.io.write_triangle_mesh(str(path), mesh)
    return path


def test_sphere_signed_distance_has_right_signs_and_values(sphere_sdf):
    rng = np.random.default_rng(0)
    points = rng.uniform(-0.5, 0.5, (4000, 3)).astype(np.float32)
    exact = np.linalg.norm(points, axis=-1) - 0.35
    sdf = sphere_sdf.signed_distance(points)
    assert np.abs(sdf - exact).max() < 2e-3  # the icosphere deviates from the sphere by < 1e-3
    clear = np.abs(exact) > 2e-3
    assert (np.sign(sdf[clear]) == np.sign(exact[clear])).all()
    assert (sdf[np.linalg.norm(points, axis=-1) < 0.3] < 0).all()  # negative inside


def test_bacon_batches_are_half_coarse_half_fine_inside_the_box(sphere_sdf):
    batch = sphere_sdf.sample(4000)
    assert batch.points.shape == (4000, 3) and batch.sdf.shape == (4000,)
    assert batch.num_coarse == 2000
    assert batch.points.abs().max() <= 0.5
    coarse, fine = batch.sdf[:2000].abs(), batch.sdf[2000:].abs()
    assert fine.median() < 2e-3  # Laplace 1e-3 around the surface
    assert coarse.median() > 20 * fine.median()  # Laplace 0.1
    exact = batch.points.norm(dim=-1) - 0.35
    assert (batch.sdf - exact).abs().max() < 2e-3


def test_generated_shape_is_watertight_and_normalised():
    name, mesh, _ = load_shape(None)
    assert name == "generated"
    assert is_closed(np.asarray(mesh.triangles))
    v = np.asarray(mesh.vertices)
    assert v.min() == pytest.approx(-0.45) and v.max() == pytest.approx(0.45)
    assert is_closed(np.asarray(generated_shape(3).triangles))


def test_bacon_normalization_keeps_aspect_ratio():
    v = np.array([[0, 0, 0], [10, 2, 1], [4, 1, 3.0]])
    norm = bacon_normalization(v)
    out = norm.apply(v)
    assert out.min() == pytest.approx(-0.45) and out.max() == pytest.approx(0.45)
    np.testing.assert_allclose(np.ptp(out, axis=0) / np.ptp(v, axis=0), norm.scale)


def test_load_mesh_accepts_stl_with_repeated_vertices(tmp_path):
    path = _write(sphere_mesh(0.3, 3), tmp_path / "sphere.stl")  # STL stores three vertices per triangle
    mesh = load_mesh(path)
    assert is_closed(np.asarray(mesh.triangles))


CUBE_CORNERS = "".join(f"v {x} {y} {z}\n" for z in (0, 1) for y in (0, 1) for x in (0, 1))


@pytest.mark.parametrize(
    "faces",
    [
        ["1 3 4 2", "5 6 8 7", "1 2 6 5", "2 4 8 6", "4 3 7 8", "3 1 5 7"],  # quads, as Blender writes them
        ["1/1 3/1 4/1", "1/1 4/1 2/1", "5 6 8 7", "1 2 6 5", "2 4 8 6", "4 3 7 8", "3 1 5 7"],  # mixed
    ],
)
def test_obj_with_polygon_faces_is_split_into_triangles(tmp_path, faces):
    path = tmp_path / "cube.obj"
    path.write_text(CUBE_CORNERS + "".join(f"f {face}\n" for face in faces))
    mesh = load_mesh(path)  # open3d alone reads no quads: "no triangles", or holes where they were
    assert len(mesh.triangles) == 12 and is_closed(np.asarray(mesh.triangles))


def test_obj_coordinates_are_read_to_the_last_digit(tmp_path):
    sphere = o3d.geometry.TriangleMesh.create_sphere(1e-4, 10)
    vertices = np.asarray(sphere.vertices) + 1e3  # a small part far from the origin: 7 digits would merge vertices
    lines = [f"v {x!r} {y!r} {z!r}" for x, y, z in vertices.tolist()]
    lines += [f"f {a + 1} {b + 1} {c + 1}" for a, b, c in np.asarray(sphere.triangles).tolist()]
    (tmp_path / "far.obj").write_text("\n".join(lines) + "\n")
    mesh = load_mesh(tmp_path / "far.obj")
    assert len(mesh.vertices) == len(vertices)
    assert np.abs(np.sort(np.asarray(mesh.vertices), axis=0) - np.sort(vertices, axis=0)).max() == 0


def _box(size: float, corner=(0.0, 0.0, 0.0), inward: bool = False):
    box = o3d.geometry.TriangleMesh.create_box(size, size, size).translate(corner)
    if inward:  # a cavity: its triangles face into the box
        box.triangles = o3d.utility.Vector3iVector(np.asarray(box.triangles)[:, ::-1].copy())
    return box


def test_overlapping_closed_parts_are_merged_so_their_overlap_is_inside(tmp_path):
    path = _write(_box(1.0) + _box(1.0, (0.5, 0.5, 0.5)), tmp_path / "two.ply")
    overlap = np.array([[0.75, 0.75, 0.75]], dtype=np.float32)  # in both boxes: two crossings along any ray
    raw = o3d.io.read_triangle_mesh(str(path))
    assert MeshSDF(raw).signed_distance(overlap)[0] > 0  # ray parity alone calls it outside
    notices = []
    mesh = load_mesh(path, notify=notices.append)
    assert len(notices) == 1 and "its 2 parts add up to 6.7% more than their union" in notices[0]
    assert is_closed(np.asarray(mesh.triangles)) and mesh.get_volume() == pytest.approx(1.875)
    inside_one = np.array([[0.25, 0.25, 0.25], [1.25, 1.25, 1.25]], dtype=np.float32)
    outside = np.array([[1.25, 0.25, 0.25], [-0.5, 0.5, 0.5]], dtype=np.float32)
    sdf = MeshSDF(mesh).signed_distance(np.concatenate([overlap, inside_one, outside]))
    assert sdf[0] < -0.25  # deeper than the faces of either box alone: the union's nearest face is an edge away
    np.testing.assert_allclose(sdf[1:], [-0.25, -0.25, 0.25, 0.5], atol=1e-5)


@pytest.mark.parametrize(
    "parts, volume",
    [
        ([_box(1.0), _box(1.0, (2.0, 0.0, 0.0))], None),  # apart
        ([_box(1.0), _box(0.5, (0.25, 0.25, 0.25), inward=True)], None),  # a hollow box: parity is right
        ([_box(1.0), _box(0.5, (0.25, 0.25, 0.25))], 1.0),  # a solid inside a solid: one solid
        ([_box(1.0), _box(1.0, (0.5, 0.5, 0.5)), _box(0.2, (0.1, 0.1, 0.1), inward=True)], 1.875 - 0.008),
    ],
    ids=["apart", "hollow", "nested", "overlap-with-cavity"],
)
def test_parts_that_parity_reads_right_are_kept_as_they_are(tmp_path, parts, volume):
    mesh = parts[0]
    for part in parts[1:]:
        mesh += part
    notices = []
    loaded = load_mesh(_write(mesh, tmp_path / "parts.ply"), notify=notices.append)
    if volume is None:
        assert notices == [] and len(loaded.triangles) == len(mesh.triangles)
    else:
        assert len(notices) == 1 and abs(loaded.get_volume()) == pytest.approx(volume)


def test_missing_and_unsupported_files(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        load_mesh(tmp_path / "nope.obj")
    (tmp_path / "mesh.xyz").write_text("0 0 0\n")
    with pytest.raises(UsageError, match="suffix"):
        load_mesh(tmp_path / "mesh.xyz")


def test_empty_and_unreadable_files(tmp_path):
    (tmp_path / "empty.obj").write_text("")
    with pytest.raises(UsageError, match="empty"):
        load_mesh(tmp_path / "empty.obj")
    (tmp_path / "junk.ply").write_bytes(b"this is not a ply file\x00\x01\x02")
    with pytest.raises(UsageError, match="could not read"):
        load_mesh(tmp_path / "junk.ply")


def test_point_cloud_degenerate_and_flat_meshes(tmp_path):
    (tmp_path / "points.obj").write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\n")
    with pytest.raises(UsageError, match="no triangles"):
        load_mesh(tmp_path / "points.obj")
    (tmp_path / "line.obj").write_text("v 0 0 0\nv 1 0 0\nv 2 0 0\nf 1 2 3\n")
    with pytest.raises(UsageError, match="degenerate"):
        load_mesh(tmp_path / "line.obj")
    (tmp_path / "square.obj").write_text("v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1 2 3\nf 1 3 4\n")
    with pytest.raises(UsageError, match="flat"):
        load_mesh(tmp_path / "square.obj")


def test_a_closed_box_with_a_t_junction_is_told_apart_from_a_holed_one(tmp_path):
    box = o3d.geometry.TriangleMesh.create_box()
    vertices = np.asarray(box.vertices).tolist()
    corner = {tuple(v): i for i, v in enumerate(vertices)}
    a, b, c, d = (corner[(0.0, 0.0, 1.0)], corner[(1.0, 0.0, 1.0)], corner[(1.0, 1.0, 1.0)], corner[(0.0, 1.0, 1.0)])
    vertices.append([0.5, 0.0, 1.0])  # on the edge a-b, which the front face keeps whole
    middle = len(vertices) - 1
    sides = [t for t in np.asarray(box.triangles).tolist() if not all(vertices[i][2] == 1 for i in t)]
    top = [[a, middle, d], [middle, b, c], [middle, c, d]]
    mesh = o3d.geometry.TriangleMesh(o3d.utility.Vector3dVector(np.array(vertices)),
                                     o3d.utility.Vector3iVector(np.array(sides + top)))  # fmt: skip
    path = _write(mesh, tmp_path / "joined.ply")
    with pytest.raises(UsageError, match=r"3 boundary edges at T-junctions .* pass --fill-holes to join them"):
        load_mesh(path)
    notices = []
    joined = load_mesh(path, fill_holes=True, notify=notices.append)
    assert edge_counts(np.asarray(joined.triangles)) == (0, 0)
    assert np.isclose(triangle_areas(np.asarray(joined.vertices), np.asarray(joined.triangles)).sum(), 6.0)
    assert notices == ["--fill-holes joined 3 boundary edges at T-junctions with 1 triangles of no area; the surface "
                       "is unchanged"]  # fmt: skip
    mesh.remove_triangles_by_index([0])  # a real opening as well
    with pytest.raises(UsageError, match=r"not watertight: \d+ boundary edges \(holes\)"):
        load_mesh(_write(mesh, tmp_path / "holed.ply"))


def test_mesh_with_a_hole_is_refused_and_fill_holes_repairs_it(tmp_path):
    sphere = sphere_mesh(0.3, 3)
    sphere.remove_triangles_by_index([5, 100])  # two small holes
    path = _write(sphere, tmp_path / "holed.ply")
    with pytest.raises(UsageError, match="not watertight.*--fill-holes"):
        load_mesh(path)
    notices = []
    repaired = load_mesh(path, fill_holes=True, notify=notices.append)
    assert edge_counts(np.asarray(repaired.triangles)) == (0, 0)
    assert notices == ["--fill-holes closed 6 boundary edges with 2 triangles; check the mesh if the openings were "
                       "meant to be there"]  # fmt: skip
    notices.clear()
    load_mesh(_write(sphere_mesh(0.3, 3), tmp_path / "closed.ply"), fill_holes=True, notify=notices.append)
    assert not notices  # nothing to close
    radii = np.linalg.norm(np.asarray(repaired.vertices), axis=-1)  # filling adds triangles, not vertices
    assert len(radii) == len(sphere.vertices) and np.allclose(radii, 0.3, atol=1e-6)


def test_pool_roundtrip_gives_fresh_samples_in_order(tmp_path, sphere_sdf):
    arrays = build_pool(sphere_sdf, 2000, "sphere", surface_samples=500, chunk=300)
    assert arrays["coarse_points"].shape == (1000, 3) and arrays["fine_sdf"].shape == (1000,)
    exact = np.linalg.norm(arrays["fine_points"], axis=-1) - 0.35
    assert np.abs(arrays["fine_sdf"] - exact).max() < 2e-3
    np.savez(tmp_path / "pool.npz", **arrays)
    pool = SamplePool.load(tmp_path / "pool.npz", seed=3)
    assert len(pool) == 2000 and pool.meta["name"] == "sphere"
    batches = [pool.sample(400) for _ in range(5)]  # exactly one pass over the pool
    points = np.concatenate([b.points.numpy() for b in batches])
    assert len(np.unique(points, axis=0)) == 2000  # no sample repeated within a pass
    assert all(b.num_coarse == 200 for b in batches)
    again = SamplePool.load(tmp_path / "pool.npz", seed=3).sample(400)
    np.testing.assert_array_equal(again.points.numpy(), batches[0].points.numpy())
    with pytest.raises(UsageError, match="does not exist"):
        SamplePool.load(tmp_path / "missing.npz")
    with pytest.raises(UsageError, match="lacks"):
        SamplePool({"coarse_points": arrays["coarse_points"]})
    np.savez(tmp_path / "cut.npz", **{k: v for k, v in arrays.items() if k != "vertices"})
    for check in (SamplePool.load, check_pool):  # the fit's check and the benchmark's, before any work
        with pytest.raises(UsageError, match=r"cut.npz is not a complete sample pool \(it lacks vertices\)"):
            check(tmp_path / "cut.npz")
