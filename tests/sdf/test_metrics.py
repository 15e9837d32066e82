"""Shape metrics (Chamfer, normal consistency, F-score), mesh helpers (PLY writer, orientation, marching cubes
without pymcubes) and the renderer."""

import builtins
import math

import numpy as np
import open3d as o3d
import pytest

from rff_field.common.mesh import marching_cubes, orient_outward, signed_volume, write_ply
from rff_field.core.errors import UsageError
from rff_field.sdf.data import sphere_mesh, triangle_areas
from rff_field.sdf.metrics import Surface, shape_metrics
from rff_field.sdf.render import render_mesh, save_panels


def arrays(mesh):
    return np.asarray(mesh.vertices), np.asarray(mesh.triangles)


@pytest.fixture(scope="module")
def sphere():
    return arrays(sphere_mesh(0.3, subdivisions=4))


def test_identical_surfaces_score_perfectly(sphere):
    m = shape_metrics(Surface(*sphere), Surface(*sphere), num_samples=5000)
    assert m["distance"] == "exact"
    assert m["chamfer"] < 1e-12 and m["chamfer_l1"] < 1e-6
    assert m["normal_consistency"] == pytest.approx(1.0, abs=1e-6)
    assert m["f_score"] == 1.0 and not m["empty"]


@pytest.mark.parametrize("delta", [0.002, 0.01])
def test_offset_sphere_gives_known_distances(sphere, delta):
    vertices, triangles = sphere
    bigger = vertices * (0.3 + delta) / 0.3  # every point moves out by delta (up to the facets' curvature)
    m = shape_metrics(Surface(bigger, triangles), Surface(vertices, triangles), num_samples=5000, f_threshold=0.005)
    assert m["chamfer"] == pytest.approx(2 * delta**2, rel=0.1)
    assert m["chamfer_pred_to_gt"] == pytest.approx(m["chamfer_gt_to_pred"], rel=0.1)
    assert m["chamfer_l1"] == pytest.approx(delta, rel=0.1)
    assert m["f_score"] == (1.0 if delta < 0.005 else 0.0)


def test_kdtree_fallback_agrees_with_exact_distances(sphere):
    vertices, triangles = sphere
    moved = vertices + np.array([0.01, 0, 0])
    exact = shape_metrics(Surface(moved, triangles), Surface(vertices, triangles), num_samples=4000)
    approx = shape_metrics(
        Surface(moved, triangles, exact=False, dense_samples=200_000),
        Surface(vertices, triangles, exact=False, dense_samples=200_000),
        num_samples=4000,
    )
    assert approx["distance"] == "kdtree"
    assert approx["chamfer"] == pytest.approx(exact["chamfer"], rel=0.15)
    assert approx["chamfer"] >= exact["chamfer"] * 0.95  # sampled surfaces only overestimate distances


def test_kdtree_floor_is_the_spacing_of_the_dense_samples(sphere):
    # a surface against itself: each distance is to the nearest of N dense samples, E[d^2] = area / (pi N)
    dense = 50_000
    m = shape_metrics(Surface(*sphere, exact=False, dense_samples=dense), Surface(*sphere, exact=False,
                      dense_samples=dense), num_samples=4000)  # fmt: skip
    area = triangle_areas(*sphere).sum()
    assert m["chamfer"] == pytest.approx(2 * area / (np.pi * dense), rel=0.2)


def test_the_ground_truth_count_is_what_its_samples_hold(sphere):
    held = Surface(*sphere).sample(300, seed=1)
    m = shape_metrics(Surface(*sphere), Surface(*sphere), num_samples=1000, gt_samples=held)
    assert (m["num_samples"], m["num_gt_samples"]) == (1000, 300)


def test_empty_prediction_has_no_distances(sphere):
    m = shape_metrics(Surface(np.zeros((0, 3)), np.zeros((0, 3), int)), Surface(*sphere), num_samples=100)
    assert m["empty"] and m["chamfer"] is None and m["f_score"] == 0.0


def test_write_ply_roundtrip_and_refuses_to_overwrite(tmp_path, sphere):
    path = write_ply(*sphere, tmp_path / "m.ply")
    back = o3d.io.read_triangle_mesh(str(path))
    np.testing.assert_allclose(np.asarray(back.vertices), sphere[0], atol=1e-6)
    np.testing.assert_array_equal(np.asarray(back.triangles), sphere[1])
    with pytest.raises(UsageError, match="--overwrite"):
        write_ply(*sphere, path)


def test_orient_outward_flips_inverted_meshes(sphere):
    vertices, triangles = sphere
    inverted = triangles[:, ::-1]
    assert signed_volume(vertices, inverted) < 0
    fixed = orient_outward(vertices, inverted)
    assert signed_volume(vertices, fixed) == pytest.approx(abs(signed_volume(vertices, triangles)))


def test_marching_cubes_falls_back_to_scikit_image(monkeypatch):
    axis = np.linspace(-0.5, 0.5, 32)
    grid = np.linalg.norm(np.stack(np.meshgrid(axis, axis, axis, indexing="ij"), -1), axis=-1) - 0.3
    v_mcubes, _ = marching_cubes(grid, [-0.5] * 3, [0.5] * 3)
    real_import = builtins.__import__

    def no_mcubes(name, *args, **kwargs):
        if name == "mcubes":
            raise ImportError("no pymcubes here")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_mcubes)
    v_skimage, f_skimage = marching_cubes(grid, [-0.5] * 3, [0.5] * 3)
    assert len(f_skimage) > 100
    for v in (v_mcubes, v_skimage):
        assert np.abs(np.linalg.norm(v, axis=-1) - 0.3).max() < 0.01


def test_render_shows_the_mesh_and_saves_panels(tmp_path, sphere):
    image = render_mesh(*sphere, size=64)
    assert image.shape == (64, 64, 3)
    covered = (image < 0.99).any(-1).mean()
    assert covered == pytest.approx(math.pi * 0.3**2 / 1.05**2, rel=0.15)  # a disc of radius 0.3
    assert (render_mesh(np.zeros((0, 3)), np.zeros((0, 3), int), size=8) == 1).all()
    path = save_panels([("a", image), ("b", image)], tmp_path / "panels.png", title="t")
    assert path.stat().st_size > 1000


def test_each_direction_is_measured_from_its_own_surface(sphere):
    # The prediction covers the upper half of the ground truth: every predicted point lies on the ground truth,
    # while the lower half of the ground truth is far from the prediction.
    vertices, triangles = sphere
    upper = triangles[vertices[triangles].mean(axis=1)[:, 2] > 0]
    m = shape_metrics(Surface(vertices, upper), Surface(vertices, triangles), num_samples=5000, f_threshold=0.005)
    assert m["chamfer_pred_to_gt"] < 1e-12 and m["chamfer_gt_to_pred"] > 1e-3
    assert m["chamfer"] == m["chamfer_pred_to_gt"] + m["chamfer_gt_to_pred"]
    assert m["precision"] == 1.0 and 0.4 < m["recall"] < 0.7
    assert m["f_score"] == pytest.approx(2 * m["recall"] / (1 + m["recall"]))
    assert 0 < m["chamfer_l1"] <= 0.5 * math.sqrt(m["chamfer_gt_to_pred"])  # half the mean distance (Jensen)
    assert 0.6 < m["normal_consistency"] < 0.99  # the predicted half agrees; the rest meets the rim at an angle


def test_normal_consistency_ignores_the_winding(sphere):
    vertices, triangles = sphere
    flipped = Surface(vertices, triangles[:, ::-1].copy())
    m = shape_metrics(flipped, Surface(vertices, triangles), num_samples=5000)
    assert m["normal_consistency"] == pytest.approx(1.0, abs=1e-6)
