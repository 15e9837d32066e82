"""``rff-demo``: generate the synthetic scene, train rff-nerf-lite on it, evaluate it on its test views and export a
mesh, all under one folder; nothing is downloaded."""

from __future__ import annotations

import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal, Optional, Sequence

from rff_field.cli.common import run_command
from rff_field.common.machine import resolve_device
from rff_field.common.mesh import check_resolution
from rff_field.common.options import Values
from rff_field.common.outputs import claimed_folder, clear_folder, write_json
from rff_field.core.embedding import EmbeddingConfig
from rff_field.core.errors import UsageError, check_fields

MARKER = ".rff-demo"
"""The file that marks a folder as rff-demo's (only such a folder is replaced, with --overwrite)."""


@dataclass
class Demo:
    """Synthetic scene, rff-nerf-lite training, test-view evaluation and coloured mesh, in one folder."""

    output_dir: Path = Path("demo_output")
    """Folder for the scene, the run, the evaluation and the mesh (new, empty, or an earlier demo's)."""
    overwrite: bool = False
    """Replace an earlier demo's OUTPUT_DIR (never a folder rff-demo did not write)."""
    steps: int = 1000
    """Training steps."""
    image_size: int = 64
    """Width and height of the generated images (pixels)."""
    num_train_views: int = 40
    """Training views of the generated scene."""
    num_test_views: int = 8
    """Test views (an orbit at 30 degrees elevation)."""
    embedding: Annotated[EmbeddingConfig, Values] = field(
        default_factory=lambda: EmbeddingConfig(pe_bands="nerf-pytorch", num_frequencies=10, include_input=True)
    )
    """rff-nerf-lite's position embedding and its filter (--embedding.filtered False: the MLP+PE baseline)."""
    mesh_resolution: int = 128
    """Grid points per side of the mesh."""
    mesh_threshold: float = 10.0
    """Density at which the mesh's surface is placed."""
    device: Literal["auto", "cpu", "cuda", "mps"] = "auto"
    """Where to train and render (auto: CUDA when there is one)."""
    threads: int = 1
    """torch's CPU threads (on a small or shared machine, more mostly wait on each other)."""
    seed: int = 42
    """Seed of the training (the scene's poses use seed 0)."""

    def main(self) -> dict:
        """Run the demo; returns the summary also written to OUTPUT_DIR/summary.json."""
        from rff_field.nerf.synthetic_scene import SceneSpec

        spec = SceneSpec(self.image_size, self.num_train_views, num_test_views=self.num_test_views)
        spec.check()
        check_fields(self, positive_int=("steps", "threads"), non_negative_int=("seed",), positive=("mesh_threshold",))
        self.embedding.check("--embedding.")
        check_resolution(self.mesh_resolution, "--mesh-resolution")
        if self.seed >= 2**32:
            raise UsageError(f"--seed must be below 2**32, got {self.seed}")
        if self.device != "mps":
            resolve_device(self.device)
        out = self.output_dir
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            if not (out / MARKER).exists():
                raise UsageError(f"--output-dir {out} is not an empty folder nor an earlier demo's; choose another")
            if not self.overwrite:
                raise UsageError(f"--output-dir {out} holds an earlier demo; pass --overwrite to replace it")
        with claimed_folder(out, "--output-dir"):
            clear_folder(out)
            return self.run(spec)

    def run(self, spec) -> dict:
        """The demo's four stages in OUTPUT_DIR, which this run holds."""
        from nerfstudio.utils.rich_utils import CONSOLE

        from rff_field.nerf.synthetic_scene import write_blender_scene

        out = self.output_dir
        from rff_field.nerf import quiet_known_warnings

        CONSOLE.print("rff-demo: loading nerfstudio (the steps below show their progress)", highlight=False)
        quiet_known_warnings()  # before nerfstudio is imported
        import torch

        from rff_field.cli.export_mesh import ExportMesh
        from rff_field.nerf.evaluate import evaluate_views
        from rff_field.nerf.loading import load_pipeline
        from rff_field.nerf.methods import rff_nerf_config
        from rff_field.nerf.training import run_config, train_in_process

        torch.set_num_threads(self.threads)
        (out / MARKER).write_text("written by rff-demo; rff-demo --overwrite may replace this folder\n")
        CONSOLE.rule("[bold]1/4 The synthetic scene")
        scene = write_blender_scene(out / "scene", spec, progress=True)
        CONSOLE.rule(f"[bold]2/4 Training rff-nerf-lite, {self.steps} steps (ETA: time left)")
        config = run_config(rff_nerf_config(lite=True), scene, out / "runs", self.steps, experiment_name="demo")
        config.machine.device_type, config.machine.seed = self.device, self.seed
        config.pipeline.model.embedding = self.embedding
        config.steps_per_eval_batch = config.steps_per_eval_image = config.steps_per_eval_all_images = 10**9
        config_path = train_in_process(config)
        CONSOLE.rule("[bold]3/4 The test views")
        _, pipeline, step = load_pipeline(config_path, test_mode="test")
        metrics = evaluate_views(pipeline, out / "eval")
        CONSOLE.rule("[bold]4/4 The mesh")
        try:
            mesh = ExportMesh(config_path, out / "mesh.ply", self.mesh_threshold, self.mesh_resolution).main()
        except UsageError as err:  # in rff-demo's words: its options are --mesh-threshold, --mesh-resolution
            raise UsageError(re.sub(r"--(threshold|resolution)\b", r"--mesh-\1", str(err))) from None
        summary = {"steps": step + 1, "test_metrics": metrics["mean"], "scene": str(scene), "config": str(config_path),
                   "renders": str(out / "eval" / "renders"), "mesh": str(mesh)}  # fmt: skip
        write_json(out / "summary.json", summary)
        psnr, ssim = metrics["mean"]["psnr"], metrics["mean"]["ssim"]
        viewer = "ns-viewer"
        if shutil.which(viewer) is None:  # not on the PATH: make demo does not activate .venv
            path = Path(sys.executable).parent / viewer
            viewer = str(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)
        CONSOLE.print(f"Test views: {psnr:.2f} dB PSNR, SSIM {ssim:.4f}; renders in {summary['renders']}, mesh "
                      f"{mesh}\nOpen the run in the viewer: {viewer} --load-config {config_path}",
                      highlight=False, soft_wrap=True)  # fmt: skip
        return summary


def entrypoint(args: Optional[Sequence[str]] = None) -> None:
    """Console script ``rff-demo``."""
    run_command("rff-demo", Demo, __doc__, args)


if __name__ == "__main__":
    entrypoint()
