"""Meshes of fields (rff_field.common.mesh): grid sampling, marching cubes, components, writing."""

import numpy as np
import pytest
import torch
import trimesh

from rff_field.common.mesh import keep_components, marching_cubes, sample_grid, write_mesh
from rff_field.core.errors import UsageError


def two_spheres(points: torch.Tensor) -> torch.Tensor:
    big = points.norm(dim=-1) - 0.3
    small = (points - torch.tensor([0.4, 0.4, 0.4])).norm(dim=-1) - 0.06
    return torch.minimum(big, small)


def test_grid_of_a_signed_distance_meshes_to_closed_outward_spheres():
    values = sample_grid(two_spheres, [-0.5] * 3, [0.5] * 3, 41, batch_size=1000)
    assert values[20, 20, 20] == pytest.approx(-0.3) and values[0, 20, 20] == pytest.approx(0.2)  # [ix, iy, iz]
    assert values[20, 0, 20] == values[20, 20, 0] == values[0, 20, 20]
    mesh = marching_cubes(values, [-0.5] * 3, [0.5] * 3, inside="below")
    assert mesh.is_watertight and mesh.volume == pytest.approx(4 / 3 * np.pi * (0.3**3 + 0.06**3), rel=0.05)
    assert len(mesh.split()) == 2
    largest = keep_components(mesh, min_fraction=0.2)
    assert len(largest.split()) == 1 and np.abs(np.linalg.norm(largest.vertices, axis=-1) - 0.3).max() < 0.01
    flipped = marching_cubes(-values, [-0.5] * 3, [0.5] * 3, inside="above")
    assert flipped.volume == pytest.approx(mesh.volume)
    assert marching_cubes(values + 1, [-0.5] * 3, [0.5] * 3).is_empty


def test_write_mesh_keeps_existing_files_unless_told(tmp_path):
    mesh = trimesh.creation.box()
    path = write_mesh(mesh, tmp_path / "box.ply")
    assert trimesh.load(path).volume == pytest.approx(1.0)
    with pytest.raises(UsageError, match="overwrite"):
        write_mesh(mesh, path)
    write_mesh(mesh.apply_scale(2), path, overwrite=True)
    assert trimesh.load(path).volume == pytest.approx(8.0)
    with pytest.raises(UsageError, match="empty"):
        write_mesh(trimesh.Trimesh(), tmp_path / "empty.ply")
