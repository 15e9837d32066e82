"""``rff-export-mesh``: a coloured mesh from the density field of a trained rff-nerf or rff-nerfacto run."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Sequence, Tuple

import tyro
from nerfstudio.utils.rich_utils import CONSOLE

from rff_field.cli.common import call_main, run_command
from rff_field.common.outputs import check_output_path
from rff_field.core.errors import UsageError

Vec3 = Tuple[float, float, float]


@dataclass
class ExportMesh:
    """Extract a mesh from a trained rff-nerf or rff-nerfacto model: marching cubes on its density field, vertex
    colours from the field, largest connected component kept, written with open3d."""

    load_config: Path
    """config.yml of a trained rff-nerf(-lite) or rff-nerfacto(-lite) run (ns-train prints its path at the end)."""
    output_path: Path = Path("mesh.ply")
    """Mesh file to write (.ply, .obj, .off or .stl)."""
    resolution: int = 256
    """Grid points per side of the marching-cubes grid (memory and time grow as its cube)."""
    threshold: float = 10.0
    """Density at which the surface is placed (higher: tighter surface, lower: more floaters). 10 suits short
    CPU runs; long-trained models have denser surfaces (try 25-50)."""
    field: Literal["fine", "coarse"] = "fine"
    """Which of rff-nerf's two fields to mesh (rff-nerfacto has one main field: fine)."""
    bbox_min: Optional[Vec3] = None
    """Lower corner of the box to mesh (default: the scene box of the run's dataset)."""
    bbox_max: Optional[Vec3] = None
    """Upper corner of the box to mesh (default: the scene box of the run's dataset)."""
    keep_largest_component: bool = True
    """Keep only the largest connected piece of the mesh."""
    batch_size: int = 65536
    """Points per forward pass of the field."""
    overwrite: bool = False
    """Replace OUTPUT_PATH if it exists."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options that cannot work, before anything is loaded."""
        fit = self.load_config if self.load_config.is_dir() else self.load_config.parent
        if (fit / "config.json").is_file() and (fit / "history.npz").is_file():
            again = f"; to extract it again (e.g. on a finer grid) run: rff-sdf mesh --fit {shlex.quote(str(fit))}"
            raise UsageError(
                f"{fit} holds an rff-sdf fit, not an ns-train run: its mesh is {fit / 'mesh.ply'}"
                + (again if (fit / "model.pt").is_file() else " (its weights were not saved: --no-save-model)")
            )
        if self.load_config.is_dir():
            raise UsageError(
                f"--load-config {self.load_config} is a folder; pass the config.yml file that ns-train printed at the "
                "end of training (it sits in the run's folder, next to nerfstudio_models/)"
            )
        if not self.load_config.is_file():
            raise UsageError(
                f"{self.load_config} does not exist; pass the config.yml that ns-train printed at the end of training"
            )
        if not math.isfinite(self.threshold) or self.threshold <= 0:
            raise UsageError(f"--threshold must be a positive density (densities are never negative), got "
                             f"{self.threshold}")  # fmt: skip
        if self.resolution < 2:
            raise UsageError(f"--resolution must be at least 2, got {self.resolution}")
        if self.batch_size < 1:
            raise UsageError(f"--batch-size must be positive, got {self.batch_size}")
        check_output_path(self.output_path, (".ply", ".obj", ".off", ".stl"), self.overwrite)
        if (self.bbox_min is None) != (self.bbox_max is None):
            raise UsageError("give both --bbox-min and --bbox-max, or neither")
        if not all(math.isfinite(v) for v in (*(self.bbox_min or ()), *(self.bbox_max or ()))):
            raise UsageError(f"--bbox-min {self.bbox_min} and --bbox-max {self.bbox_max} must be finite numbers")
        if self.bbox_min is not None and self.bbox_max is not None:
            if not all(lo < hi for lo, hi in zip(self.bbox_min, self.bbox_max)):
                raise UsageError(f"--bbox-min {self.bbox_min} must be below --bbox-max {self.bbox_max} on every axis")

    def main(self) -> Path:
        """Load the run, extract the mesh and write it; returns the mesh's path."""
        self.check()  # before the heavy imports, so that bad options fail at once
        from rff_field.nerf.quiet import quiet_known_warnings

        quiet_known_warnings()  # before nerfstudio is imported: some warn on import
        from rff_field.common.mesh import write_mesh
        from rff_field.nerf.loading import load_rff_pipeline, read_run_config
        from rff_field.nerf.mesh_export import density_mesh
        from rff_field.nerf.model import RFFNeRFModelConfig

        run = read_run_config(self.load_config)  # fail fast, before the dataset and the model are loaded
        two_fields = isinstance(run.pipeline.model, RFFNeRFModelConfig)  # rff-nerfacto has one main field
        if self.field == "coarse" and not two_fields:
            raise UsageError(f"--field coarse: a '{run.method_name}' run has one main field (fine); omit --field")
        _, _, model, step = load_rff_pipeline(self.load_config, test_mode="inference")
        model.apply_flush_denormals()  # the grid is sampled through the field, not the model's forward
        aabb = model.scene_box.aabb
        bbox_min = self.bbox_min if self.bbox_min is not None else tuple(aabb[0].tolist())
        bbox_max = self.bbox_max if self.bbox_max is not None else tuple(aabb[1].tolist())
        if two_fields:
            field = model.field_fine if self.field == "fine" else model.field_coarse
        else:
            field = model.field  # its proposal networks are coarse density fields
        with CONSOLE.status(f"Marching cubes on a {self.resolution}^3 grid of the {self.field} density..."):
            mesh = density_mesh(
                field,
                bbox_min,
                bbox_max,
                resolution=self.resolution,
                threshold=self.threshold,
                keep_largest=self.keep_largest_component,
                batch_size=self.batch_size,
                device=model.device,
            )
        path = write_mesh(mesh, self.output_path, overwrite=self.overwrite)
        CONSOLE.print(
            f"Wrote {path} ({len(mesh.vertices)} vertices, {len(mesh.triangles)} triangles; "
            f"checkpoint of step {step}, density {self.threshold:g})"
        )
        return path


def run(args: ExportMesh) -> int:
    """Run the command; returns the exit status (2 for bad input, with one line on stderr)."""
    return call_main("rff-export-mesh", args)[0]


def entrypoint(args: Optional[Sequence[str]] = None) -> None:
    """Entry point of ``rff-export-mesh``."""
    from rff_field.nerf.quiet import quiet_known_warnings

    quiet_known_warnings()
    tyro.extras.set_accent_color("bright_yellow")
    run_command("rff-export-mesh", ExportMesh, __doc__, args=args)


if __name__ == "__main__":
    entrypoint()
