"""How close a reconstructed surface is to the truth: Chamfer distance, normal consistency and F-score, from points
sampled on each surface to the other's exact closest points (no sampling floor)."""

from __future__ import annotations

from typing import Optional

import numpy as np
import open3d as o3d
import trimesh

from rff_field.sdf.data import raycasting_scene


def closest_points(mesh: trimesh.Trimesh, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distance from each point to the surface of ``mesh`` and the normal of the triangle closest to it."""
    found = raycasting_scene(mesh).compute_closest_points(o3d.core.Tensor(points.astype(np.float32)))
    return np.linalg.norm(points - found["points"].numpy(), axis=-1), found["primitive_normals"].numpy()


def shape_metrics(
    pred: trimesh.Trimesh, truth: trimesh.Trimesh, num_samples: int = 100_000, f_threshold: float = 0.005, seed: int = 0
) -> dict[str, Optional[float]]:
    """Chamfer distance (mean squared, both directions summed; each one and the L1 form too), normal consistency and
    F-score at ``f_threshold`` of ``pred`` against ``truth``; the distances are None when ``pred`` is empty."""
    if pred.is_empty:
        return {"chamfer": None, "chamfer_pred_to_truth": None, "chamfer_truth_to_pred": None, "chamfer_l1": None,
                "normal_consistency": None, "f_score": 0.0}  # fmt: skip
    rng = np.random.default_rng(seed)
    p_points, p_faces = trimesh.sample.sample_surface(pred, num_samples, seed=rng)
    t_points, t_faces = trimesh.sample.sample_surface(truth, num_samples, seed=rng)
    d_pt, n_pt = closest_points(truth, p_points)
    d_tp, n_tp = closest_points(pred, t_points)
    cos_p = np.abs((pred.face_normals[p_faces] * n_pt).sum(-1))
    cos_t = np.abs((truth.face_normals[t_faces] * n_tp).sum(-1))
    precision, recall = float((d_pt < f_threshold).mean()), float((d_tp < f_threshold).mean())
    return {
        "chamfer": float((d_pt**2).mean() + (d_tp**2).mean()),
        "chamfer_pred_to_truth": float((d_pt**2).mean()),
        "chamfer_truth_to_pred": float((d_tp**2).mean()),
        "chamfer_l1": float((d_pt.mean() + d_tp.mean()) / 2),
        "normal_consistency": float((cos_p.mean() + cos_t.mean()) / 2),
        "f_score": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
    }
