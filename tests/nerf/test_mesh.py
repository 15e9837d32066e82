"""Density-field meshing on an analytic field: surface where it should be, outward normals, colours, one piece."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from nerfstudio.field_components.field_heads import FieldHeadNames

from rff_field.nerf.mesh_export import EmptyMeshError, density_mesh


class SphereField:
    """Density 100 * (0.5 - |x|) inside a ball of radius 0.5 (plus a small far blob); colour = |x| clipped."""

    def density_fn(self, positions: torch.Tensor) -> torch.Tensor:
        ball = 100 * (0.5 - positions.norm(dim=-1)).clamp(min=0)
        blob = 100 * (0.1 - (positions - torch.tensor([1.2, 1.2, 1.2])).norm(dim=-1)).clamp(min=0)
        return (ball + blob)[..., None]

    def forward(self, ray_samples):
        positions = ray_samples.frustums.get_positions()
        dirs = ray_samples.frustums.directions
        # colour depends on the viewing direction, so the test sees which way the field was looked at
        return {FieldHeadNames.RGB: (0.5 + 0.5 * dirs).clamp(0, 1), FieldHeadNames.DENSITY: self.density_fn(positions)}


@pytest.mark.parametrize("backend", ["pymcubes", "skimage"])
def test_sphere_mesh(backend, monkeypatch):
    if backend == "skimage":
        monkeypatch.setitem(sys.modules, "mcubes", None)  # import fails: the scikit-image fallback runs
    mesh = density_mesh(SphereField(), [-1.5] * 3, [1.5] * 3, resolution=48, threshold=25.0, batch_size=64)
    vertices = np.asarray(mesh.vertices)
    radius = np.linalg.norm(vertices, axis=1)
    assert np.allclose(radius, 0.25, atol=0.05)  # density 25 at |x| = 0.25; the far blob was dropped
    normals = np.asarray(mesh.vertex_normals)
    assert (np.sum(normals * vertices, axis=1) > 0).mean() > 0.99  # outward
    colours = np.asarray(mesh.vertex_colors)
    expected = 0.5 + 0.5 * (-normals)  # looked at from outside, along -normal
    assert np.abs(colours - expected).max() < 1e-5


def test_empty_level_set_is_reported():
    with pytest.raises(EmptyMeshError, match="never crosses --threshold 1000"):
        density_mesh(SphereField(), [-1.5] * 3, [1.5] * 3, resolution=16, threshold=1000.0)
    flat = 0.4 + 0.1 * torch.rand(8, 8, 8)  # an untrained field's density
    with pytest.raises(EmptyMeshError, match=r"hardly varies there \(it spans 0.4\d* to 0.\d+\): the field has no"):
        density_mesh(SphereField(), [-1.5] * 3, [1.5] * 3, resolution=8, threshold=10.0, density_grid=flat)
    empty = torch.zeros(8, 8, 8)
    with pytest.raises(EmptyMeshError, match="the density is 0 everywhere in the box: the field is empty there"):
        density_mesh(SphereField(), [-1.5] * 3, [1.5] * 3, resolution=8, threshold=10.0, density_grid=empty)
