"""Chamfer distance, normal consistency and F-score against the ground truth."""

import pytest
import trimesh

from rff_field.sdf.metrics import shape_metrics


@pytest.fixture(scope="module")
def sphere():
    return trimesh.creation.icosphere(subdivisions=4, radius=0.3)


def test_a_surface_against_itself_scores_perfectly(sphere):
    metrics = shape_metrics(sphere, sphere, num_samples=5000)
    assert metrics["chamfer"] < 1e-12 and metrics["f_score"] == 1.0
    assert metrics["normal_consistency"] == pytest.approx(1.0, abs=1e-6)


def test_chamfer_grows_with_an_offset_as_twice_its_square(sphere):
    chamfers = []
    for offset in (0.01, 0.02, 0.04):
        moved = sphere.copy().apply_translation([offset, 0, 0])
        metrics = shape_metrics(moved, sphere, num_samples=5000, f_threshold=0.015)
        chamfers.append(metrics["chamfer"])
        assert metrics["chamfer_l1"] < offset and metrics["chamfer"] < 2 * offset**2
    assert chamfers[0] < chamfers[1] < chamfers[2]
    bigger = sphere.copy().apply_scale(1.1)  # every point 0.03 from the other surface
    assert shape_metrics(bigger, sphere, num_samples=5000)["chamfer"] == pytest.approx(2 * 0.03**2, rel=0.05)
    assert shape_metrics(bigger, sphere, num_samples=5000, f_threshold=0.02)["f_score"] == 0.0


def test_an_empty_reconstruction_has_no_distances(sphere):
    metrics = shape_metrics(trimesh.Trimesh(), sphere)
    assert metrics["chamfer"] is None and metrics["f_score"] == 0.0
