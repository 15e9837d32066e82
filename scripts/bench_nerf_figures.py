"""Pictures of an rff-demo result for the docs: test views (ground truth, render, depth) and the exported mesh.

usage: .venv/bin/python scripts/bench_nerf_figures.py --demo demo_output --dest benchmarks/nerf
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import List

import matplotlib
import numpy as np
import tyro

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from mpl_toolkits.mplot3d.art3d import Poly3DCollection  # noqa: E402
from PIL import Image  # noqa: E402


@dataclass
class Figures:
    """Draw demo_views.png and demo_mesh.png from an rff-demo output folder."""

    demo: Path = Path("demo_output")
    """Output folder of rff-demo."""
    dest: Path = Path("benchmarks/nerf")
    """Where to write the PNGs."""
    views: List[str] = field(default_factory=lambda: ["r_0", "r_3"])
    """Test views to show."""

    def main(self) -> None:
        self.dest.mkdir(parents=True, exist_ok=True)
        metrics = json.loads((self.demo / "eval" / "metrics.json").read_text())
        psnr = {v["view"]: v["psnr"] for v in metrics["views"]}
        renders = self.demo / "eval" / "renders"
        fig, axes = plt.subplots(len(self.views), 3, figsize=(7.5, 2.6 * len(self.views)), squeeze=False)
        for row, view in enumerate(self.views):
            for col, (kind, label) in enumerate(
                (("gt", "ground truth"), ("rgb", f"rff-nerf-lite {psnr[view]:.2f} dB"), ("depth", "depth"))
            ):
                ax = axes[row][col]
                ax.imshow(Image.open(renders / f"{view}_{kind}.png"), interpolation="nearest")
                ax.set_title(f"{view}: {label}" if col == 0 else label, fontsize=9)
                ax.axis("off")
        fig.tight_layout()
        fig.savefig(self.dest / "demo_views.png", dpi=110)
        plt.close(fig)
        self._mesh()
        print(f"wrote {self.dest / 'demo_views.png'} and {self.dest / 'demo_mesh.png'}")

    def _mesh(self) -> None:
        import open3d as o3d

        mesh = o3d.io.read_triangle_mesh(str(self.demo / "mesh.ply"))
        vertices = np.asarray(mesh.vertices)
        triangles = np.asarray(mesh.triangles)
        colours = np.asarray(mesh.vertex_colors)[triangles].mean(axis=1)
        normals = np.asarray(mesh.compute_triangle_normals().triangle_normals)
        light = np.array([0.45, 0.3, 0.84]) / np.linalg.norm([0.45, 0.3, 0.84])
        shade = 0.55 + 0.45 * np.clip(normals @ light, 0, 1)
        fig = plt.figure(figsize=(8, 4))
        for i, (elev, azim) in enumerate(((30, 15), (30, 195))):
            ax = fig.add_subplot(1, 2, i + 1, projection="3d")
            ax.add_collection3d(
                Poly3DCollection(vertices[triangles], facecolors=np.clip(colours * shade[:, None], 0, 1), linewidths=0)
            )
            lo, hi = vertices.min(axis=0), vertices.max(axis=0)
            centre, half = (lo + hi) / 2, (hi - lo).max() / 2
            for setter, c in zip((ax.set_xlim, ax.set_ylim, ax.set_zlim), centre):
                setter(c - half, c + half)
            ax.set_box_aspect((1, 1, 1))
            ax.view_init(elev=elev, azim=azim)
            ax.axis("off")
        fig.suptitle(f"rff-export-mesh of the demo ({len(triangles):,} triangles, vertex colours from the field)")
        fig.tight_layout()
        fig.savefig(self.dest / "demo_mesh.png", dpi=110)
        plt.close(fig)


if __name__ == "__main__":
    tyro.cli(Figures).main()
