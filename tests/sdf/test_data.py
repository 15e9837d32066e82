"""Shapes for SDF regression: normalisation, exact signed distances and BACON's samples."""

import numpy as np
import pytest
import trimesh

from rff_field.sdf.data import Normalization, ShapeSampler, load_mesh, load_shape


@pytest.fixture(scope="module")
def sphere():
    return ShapeSampler(trimesh.creation.icosphere(subdivisions=5, radius=0.35), seed=0)


def test_signed_distances_of_a_sphere_are_exact_and_negative_inside(sphere):
    points = np.random.default_rng(0).uniform(-0.5, 0.5, (4000, 3))
    exact = np.linalg.norm(points, axis=-1) - 0.35
    sdf = sphere.signed_distance(points)
    assert np.abs(sdf - exact).max() < 2e-3  # the icosphere is within 1e-3 of the sphere
    assert (sdf[exact < -2e-3] < 0).all() and (sdf[exact > 2e-3] > 0).all()


def test_samples_are_coarse_then_fine_inside_the_box(sphere):
    points, sdf = sphere.sample(4000)
    assert points.shape == (4000, 3) and sdf.shape == (4000,) and points.abs().max() <= 0.5
    coarse, fine = sdf[:2000].abs(), sdf[2000:].abs()
    assert fine.median() < 2e-3 < 2e-2 < coarse.median()  # Laplace 1e-3 and 0.1 around the surface
    assert (sdf - (points.norm(dim=-1) - 0.35)).abs().max() < 2e-3


def test_sampling_is_seeded():
    mesh = trimesh.creation.icosphere(subdivisions=2, radius=0.3)
    first, second = (ShapeSampler(mesh, seed=3).sample(100)[0] for _ in range(2))
    assert first.equal(second) and not first.equal(ShapeSampler(mesh, seed=4).sample(100)[0])


def test_normalization_is_bacons_and_inverts():
    vertices = np.random.default_rng(0).normal(size=(100, 3)) * [10, 2, 1] + 5
    normalization = Normalization.of(vertices)
    unit = normalization.to_unit(vertices)
    assert unit.min() == pytest.approx(-0.45) and unit.max() == pytest.approx(0.45)
    np.testing.assert_allclose(unit.mean(axis=0), normalization.offset, atol=1e-12)  # centred on the vertex mean
    np.testing.assert_allclose(normalization.from_unit(unit), vertices, rtol=1e-12)


def test_generated_shape_is_a_closed_solid_in_the_unit_box():
    mesh, _ = load_shape(None)
    assert mesh.is_watertight and mesh.volume > 0
    assert mesh.vertices.min() == pytest.approx(-0.45) and mesh.vertices.max() == pytest.approx(0.45)


def test_fill_holes_closes_an_open_mesh_and_stl_vertices_are_merged(tmp_path):
    sphere = trimesh.creation.icosphere(subdivisions=3)
    sphere.export(tmp_path / "sphere.stl")  # STL repeats each triangle's vertices
    assert load_mesh(tmp_path / "sphere.stl").is_watertight
    open_sphere = trimesh.Trimesh(sphere.vertices, sphere.faces[2:])
    open_sphere.export(tmp_path / "open.ply")
    closed = load_mesh(tmp_path / "open.ply", fill_holes=True)
    assert closed.is_watertight and closed.volume == pytest.approx(sphere.volume, rel=0.01)
