"""``rff-export-mesh``: a coloured mesh of the density of a trained rff-nerf or rff-nerfacto run, in the data's own
coordinates."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional, Sequence, Tuple

from rff_field.cli.common import run_command
from rff_field.core.errors import UsageError, check_fields

Vec3 = Tuple[float, float, float]


@dataclass
class ExportMesh:
    """Mesh the density of a trained rff-nerf or rff-nerfacto run: by default over the region its training cameras
    look at, with the ground cut away, in the coordinates of the data it was trained on."""

    load_config: Path
    """config.yml of a trained rff-nerf(-lite) or rff-nerfacto(-lite) run (ns-train prints its path at the end)."""
    output_path: Optional[Path] = None
    """Mesh file to write (.ply keeps the vertex colours; .obj, .off, .stl); default: mesh.ply beside config.yml."""
    threshold: float = 10.0
    """Density at which the surface is placed; the command prints the range it saw (higher: tighter surface)."""
    resolution: int = 256
    """Grid points per side (time grows as its cube)."""
    bbox_min: Optional[Vec3] = None
    """Lower corner of the box to mesh, in the output's coordinates (default: around the cameras' common focus,
    half as wide as the nearest camera is far)."""
    bbox_max: Optional[Vec3] = None
    """Upper corner of the box to mesh, in the output's coordinates."""
    keep_ground: bool = False
    """Keep the ground (by default a flat surface across the box below its centre is cut, with what lies under it)."""
    min_component: float = 0.01
    """Drop connected pieces with fewer than this share of the triangles (floaters); 0 keeps every piece."""
    nerfstudio_frame: bool = False
    """Write the mesh, and read --bbox-min/--bbox-max, in nerfstudio's normalised frame (that of ns-export) instead
    of the data's own coordinates."""
    field: Literal["fine", "coarse"] = "fine"
    """Which of rff-nerf's two fields to mesh (rff-nerfacto has one)."""
    batch_size: int = 65536
    """Points per forward pass of the field."""
    overwrite: bool = False
    """Replace OUTPUT_PATH if it exists."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options that cannot work, before anything is loaded."""
        from rff_field.common.mesh import check_resolution
        from rff_field.common.outputs import check_output_file

        if self.output_path is None:
            self.output_path = Path(self.load_config).parent / "mesh.ply"
        check_fields(self, positive=("threshold",), positive_int=("batch_size",), non_negative=("min_component",))
        check_resolution(self.resolution)
        if self.min_component >= 1:
            raise UsageError(f"--min-component is a share of the triangles below 1, got {self.min_component}")
        if self.output_path.suffix.lower() not in (".ply", ".obj", ".off", ".stl"):
            raise UsageError(f"--output-path {self.output_path} must end in .ply, .obj, .off or .stl")
        check_output_file(self.output_path, "--output-path", self.overwrite)
        if (self.bbox_min is None) != (self.bbox_max is None):
            raise UsageError("give both --bbox-min and --bbox-max, or neither")
        if self.bbox_min is not None and not all(
            math.isfinite(lo) and math.isfinite(hi) and lo < hi for lo, hi in zip(self.bbox_min, self.bbox_max)
        ):
            raise UsageError(f"--bbox-min {self.bbox_min} must lie below --bbox-max {self.bbox_max} on every axis")

    def main(self) -> Path:
        """Load the run, mesh its density and write the mesh; returns its path."""
        self.check()
        from rff_field.nerf import quiet_known_warnings

        quiet_known_warnings()  # before nerfstudio is imported
        import numpy as np
        from nerfstudio.utils.rich_utils import CONSOLE

        from rff_field.common.machine import bytes_per_sample, check_memory
        from rff_field.common.mesh import write_mesh
        from rff_field.common.torch_state import denormals_flushed
        from rff_field.nerf.loading import load_pipeline
        from rff_field.nerf.mesh_export import Frame, camera_region, density_mesh
        from rff_field.nerf.model import RFFNeRFModel

        run, pipeline, step = load_pipeline(self.load_config)
        model = pipeline.model
        if isinstance(model, RFFNeRFModel):
            field = model.field_fine if self.field == "fine" else model.field_coarse
        elif self.field == "coarse":
            raise UsageError(f"--field coarse: a {run.method_name} run has one field; leave --field out")
        else:
            field = model.field
        per_point = 64 + bytes_per_sample(field, training=False)  # indices, points, the field's activations
        check_memory("--batch-size", self.batch_size, lambda batch: per_point * batch, model.device)
        outputs = pipeline.datamanager.train_dataparser_outputs
        frame = Frame.of(outputs.dataparser_transform, outputs.dataparser_scale, identity=self.nerfstudio_frame)
        c2w = outputs.cameras.camera_to_worlds.detach().cpu().double().numpy()
        up = frame.from_model(c2w[:, :, 1].mean(0)) - frame.from_model(np.zeros(3))  # the cameras' mean up
        up /= np.linalg.norm(up)
        if self.bbox_min is not None:
            bbox_min, bbox_max = np.asarray(self.bbox_min), np.asarray(self.bbox_max)
        else:  # the field is the scene box where it has no contraction
            box = model.scene_box.aabb.double().numpy() if getattr(field, "spatial_distortion", None) is None else None
            bbox_min, bbox_max = camera_region(outputs.cameras, frame, box)
        frame_name = "nerfstudio's normalised" if self.nerfstudio_frame else "the data's"
        CONSOLE.print(f"Meshing the box {np.round(bbox_min, 3).tolist()} to {np.round(bbox_max, 3).tolist()} "
                      f"({frame_name} coordinates)", highlight=False)  # fmt: skip
        with denormals_flushed(model.config.flush_denormals):  # the field is queried outside the model's forward
            mesh = density_mesh(field, frame, bbox_min, bbox_max, self.resolution, self.threshold, self.min_component,
                                up=None if self.keep_ground else up, batch_size=self.batch_size, device=model.device,
                                report=lambda line: CONSOLE.print(line, highlight=False))  # fmt: skip
        path = write_mesh(mesh, self.output_path, overwrite=self.overwrite)
        CONSOLE.print(f"Wrote {path}: {len(mesh.vertices)} vertices, {len(mesh.faces)} triangles (checkpoint of step "
                      f"{step})", highlight=False)  # fmt: skip
        return path


def entrypoint(args: Optional[Sequence[str]] = None) -> None:
    """Console script ``rff-export-mesh``."""
    run_command("rff-export-mesh", ExportMesh, __doc__, args)


if __name__ == "__main__":
    entrypoint()
