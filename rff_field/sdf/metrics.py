"""Distances between a reconstructed surface and the ground truth: Chamfer, normal consistency, F-score.

Both surfaces are sampled uniformly by area (``num_samples`` points each, fixed seed). Each sample's distance to the
*other surface* is measured exactly (closest point on its triangles, open3d's raycasting scene), so the numbers
have no sampling floor; without open3d (e.g. on a GPU machine) the other surface is replaced by a dense sample of
it and a KD-tree (``distance="kdtree"`` in the result): each distance is then to the nearest of those samples, which
adds about ``area / (pi N)`` per direction to the squared Chamfer (about 1.2e-6 for the bunny with N = 1e6, several
times the distances of good fits), so compare such numbers only with each other.

Definitions (``P``: samples of the prediction, ``G``: samples of the ground truth, ``d(x, S)``: distance to S):

- ``chamfer = mean_P d(p, GT)^2 + mean_G d(g, pred)^2`` (both directions summed; each is also reported)
- ``chamfer_l1 = (mean_P d(p, GT) + mean_G d(g, pred)) / 2``
- ``normal_consistency``: mean over both directions of ``|n(x) . n(closest point)|`` (orientation-agnostic)
- ``f_score = 2 precision recall / (precision + recall)`` with ``precision = P(d(p, GT) < tau)`` and
  ``recall = P(d(g, pred) < tau)``
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from rff_field.sdf.data import sample_surface, triangle_areas


def _open3d():
    try:
        import open3d as o3d
    except ImportError:
        return None
    return o3d


class Surface:
    """A triangle mesh as a distance target, plus evaluation samples on it.

    Args:
        vertices: ``[V, 3]``.
        triangles: ``[F, 3]``.
        exact: Use open3d's exact point-to-triangle distances (default: when open3d is importable).
        dense_samples: Samples standing for the surface in the KD-tree fallback.
    """

    def __init__(
        self, vertices: np.ndarray, triangles: np.ndarray, exact: Optional[bool] = None, dense_samples: int = 1_000_000
    ) -> None:
        self.vertices = np.asarray(vertices, dtype=np.float64)
        self.triangles = np.asarray(triangles, dtype=np.int64)
        keep = triangle_areas(self.vertices, self.triangles) > 0 if len(self.triangles) else np.zeros(0, bool)
        self.triangles = self.triangles[keep]
        o3d = _open3d()
        self.exact = (o3d is not None) if exact is None else exact
        self._scene = None
        self._tree = None
        self.dense_samples = dense_samples
        if self.empty:
            return
        if self.exact:
            if o3d is None:
                raise ImportError("exact distances need open3d; install it or pass exact=False")
            self._scene = o3d.t.geometry.RaycastingScene()
            self._scene.add_triangles(
                o3d.core.Tensor(self.vertices.astype(np.float32)), o3d.core.Tensor(self.triangles.astype(np.uint32))
            )

    @property
    def empty(self) -> bool:
        return len(self.triangles) == 0

    def sample(self, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """``n`` area-uniform points and their triangles' unit normals."""
        return sample_surface(self.vertices, self.triangles, n, np.random.default_rng(seed))

    def closest(self, points: np.ndarray, chunk: int = 1 << 18) -> tuple[np.ndarray, np.ndarray]:
        """Distance from every point to this surface, and the surface normal at the closest point."""
        points = np.asarray(points, dtype=np.float64)
        if self.exact:
            import open3d as o3d

            dist, normals = np.empty(len(points)), np.empty((len(points), 3))
            for start in range(0, len(points), chunk):
                q = points[start : start + chunk]
                ans = self._scene.compute_closest_points(o3d.core.Tensor(q.astype(np.float32)))
                dist[start : start + chunk] = np.linalg.norm(q - ans["points"].numpy(), axis=-1)
                normals[start : start + chunk] = ans["primitive_normals"].numpy()
            return dist, normals
        if self._tree is None:
            from scipy.spatial import cKDTree

            self._dense_points, self._dense_normals = self.sample(self.dense_samples, seed=12345)
            self._tree = cKDTree(self._dense_points)
        dist, idx = self._tree.query(points, workers=1)
        return dist, self._dense_normals[idx]


def shape_metrics(
    pred: Surface,
    gt: Surface,
    num_samples: int = 100_000,
    f_threshold: float = 0.005,
    seed: int = 0,
    gt_samples: Optional[tuple[np.ndarray, np.ndarray]] = None,
) -> dict:
    """Chamfer (squared and L1), normal consistency and F-score of ``pred`` against ``gt``.

    Args:
        pred: The reconstructed surface.
        gt: The ground-truth surface.
        num_samples: Points sampled on each surface (on the ground truth at most as many as ``gt_samples`` holds;
            ``num_gt_samples`` in the result).
        f_threshold: Distance threshold of the F-score (normalised units; the shape spans 0.9).
        seed: Seed of the prediction's samples.
        gt_samples: Precomputed ground-truth samples and normals (otherwise sampled with ``seed + 1``).

    Returns:
        A dict of floats; the distances are ``None`` when the prediction has no surface.
    """
    result: dict = {
        "num_samples": int(num_samples),
        "f_threshold": float(f_threshold),
        "distance": "exact" if (pred.exact and gt.exact) else "kdtree",
    }
    if pred.empty:
        for key in (
            "chamfer",
            "chamfer_pred_to_gt",
            "chamfer_gt_to_pred",
            "chamfer_l1",
            "normal_consistency",
            "num_gt_samples",
        ):
            result[key] = None
        result.update(f_score=0.0, precision=0.0, recall=0.0, empty=True)
        return result
    p_points, p_normals = pred.sample(num_samples, seed=seed)
    if gt_samples is None:
        g_points, g_normals = gt.sample(num_samples, seed=seed + 1)
    else:
        g_points, g_normals = (np.asarray(a, dtype=np.float64)[:num_samples] for a in gt_samples)
    result["num_gt_samples"] = len(g_points)
    d_pg, n_pg = gt.closest(p_points)
    d_gp, n_gp = pred.closest(g_points)
    precision = float((d_pg < f_threshold).mean())
    recall = float((d_gp < f_threshold).mean())
    nc_p = np.abs((p_normals * n_pg).sum(-1)).mean()
    nc_g = np.abs((g_normals * n_gp).sum(-1)).mean()
    result.update(
        chamfer=float((d_pg**2).mean() + (d_gp**2).mean()),
        chamfer_pred_to_gt=float((d_pg**2).mean()),
        chamfer_gt_to_pred=float((d_gp**2).mean()),
        chamfer_l1=float(0.5 * (d_pg.mean() + d_gp.mean())),
        normal_consistency=float(0.5 * (nc_p + nc_g)),
        precision=precision,
        recall=recall,
        f_score=0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall),
        empty=False,
    )
    return result
