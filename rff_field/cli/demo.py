"""``rff-demo``: generate the bundled synthetic scene, train rff-nerf-lite on it, evaluate, export a mesh.

Everything is written under one output folder; nothing is downloaded.
"""

from __future__ import annotations

import json
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import tyro
from nerfstudio.utils.rich_utils import CONSOLE
from rich.markup import escape

from rff_field.cli.common import call_main, command_arguments, parse_command, quiet_broken_pipe
from rff_field.common.machine import resolve_device
from rff_field.common.outputs import check_writable_folder, write_text
from rff_field.core.errors import UsageError, check_fields

MARKER = ".rff-demo"
"""File that marks a folder as written by rff-demo (only such folders may be overwritten)."""
PRODUCTS = ("scene", "runs", "eval", "mesh.ply", "summary.json", MARKER)
"""What rff-demo writes in its output folder."""


@dataclass
class Demo:
    """Generate a small synthetic scene (Blender format), train rff-nerf-lite on it, evaluate on the test views,
    export a coloured mesh, and print where everything is. About 5 minutes on one CPU core with the defaults."""

    output_dir: Path = Path("demo_output")
    """Folder for the scene, the run, the evaluation and the mesh (created; must be new, empty or a former demo's)."""
    overwrite: bool = False
    """Replace the results of an earlier rff-demo in OUTPUT_DIR: its folders scene/, runs/ and eval/ are removed
    whole, with anything added to them (never touches a folder rff-demo did not write)."""
    steps: int = 1000
    """Training steps of rff-nerf-lite."""
    image_size: int = 64
    """Width and height of the generated images (pixels)."""
    num_train_views: int = 40
    """Training views of the generated scene."""
    num_test_views: int = 8
    """Test views (an orbit at 30 degrees elevation)."""
    use_filter: bool = True
    """Filter the Fourier embedding (False trains the MLP+PE baseline instead)."""
    mesh_resolution: int = 128
    """Grid points per side for marching cubes."""
    mesh_threshold: float = 10.0
    """Density at which the mesh surface is placed."""
    device: Literal["cpu", "cuda", "mps"] = "cpu"
    """Where to train and render."""
    seed: int = 42
    """Seed of the training (the scene's poses use seed 0)."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options or an output folder that cannot be used."""
        for name in ("steps", "num_train_views", "num_test_views"):
            if getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.image_size < 8:
            raise UsageError(f"--image-size must be at least 8, got {self.image_size}")
        if self.mesh_resolution < 8:
            raise UsageError(f"--mesh-resolution must be at least 8, got {self.mesh_resolution}")
        check_fields(self, positive=("mesh_threshold",))  # a density: the mesh step would find no surface
        out = self.output_dir
        check_writable_folder(out, "--output-dir")  # also refuses a file
        if out.is_dir() and any(out.iterdir()):
            if not (out / MARKER).exists():
                raise UsageError(f"{out} is not empty and was not written by rff-demo; choose another --output-dir")
            if not self.overwrite:
                raise UsageError(
                    f"{out} holds an earlier demo; pass --overwrite to replace it or choose another --output-dir"
                )
        from rff_field.nerf.checks import check_seed  # imports nerfstudio's models: after the quick checks

        check_seed(self.seed, "--seed")
        resolve_device(self.device, fallback="cpu")

    def _prepare_output(self) -> Path:
        out = self.output_dir.resolve()
        if (out / MARKER).exists():
            for name in PRODUCTS:
                path = out / name
                if path.is_dir():
                    shutil.rmtree(path)
                elif path.exists():
                    path.unlink()
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / MARKER, "written by rff-demo; `rff-demo --overwrite` may replace this folder's results\n")
        return out

    def main(self) -> dict:
        """Run the demo; returns the summary that is also written to OUTPUT_DIR/summary.json."""
        self.check()  # before the imports below, which take seconds
        from rff_field.common.mesh import write_mesh
        from rff_field.nerf.evaluate import evaluate_views
        from rff_field.nerf.loading import load_rff_pipeline
        from rff_field.nerf.mesh_export import EmptyMeshError, density_mesh
        from rff_field.nerf.synthetic_scene import SceneSpec, write_blender_scene
        from rff_field.nerf.training import lite_config, quiet_known_warnings, train_in_process

        quiet_known_warnings()
        started = time.perf_counter()
        out = self._prepare_output()

        CONSOLE.rule("[bold]1/4 Generating the synthetic scene")
        spec = SceneSpec(image_size=self.image_size, num_train=self.num_train_views, num_test=self.num_test_views)
        scene = write_blender_scene(out / "scene", spec, progress=True)

        CONSOLE.rule(f"[bold]2/4 Training rff-nerf-lite for {self.steps} steps on the {self.device.upper()}")
        config = lite_config(scene, out / "runs", self.steps, experiment_name="demo", device_type=self.device)
        config.machine.seed = self.seed
        config.pipeline.model.use_filter = self.use_filter  # type: ignore[attr-defined]
        config.steps_per_eval_image = config.steps_per_eval_batch = config.steps_per_eval_all_images = 10**9
        train_start = time.perf_counter()
        config_path = train_in_process(config, on_setup=_progress_bar(self.steps))
        train_seconds = time.perf_counter() - train_start

        CONSOLE.rule("[bold]3/4 Evaluating on the test views")
        _, pipeline, model, step = load_rff_pipeline(config_path, test_mode="test")
        metrics = evaluate_views(pipeline, out / "eval")

        CONSOLE.rule("[bold]4/4 Exporting the mesh")
        aabb = model.scene_box.aabb
        mesh, mesh_path, mesh_error = None, None, None
        try:
            with CONSOLE.status(f"Marching cubes on a {self.mesh_resolution}^3 grid..."):
                mesh = density_mesh(
                    model.field_fine,
                    aabb[0].tolist(),
                    aabb[1].tolist(),
                    resolution=self.mesh_resolution,
                    threshold=self.mesh_threshold,
                    device=model.device,
                )
            mesh_path = write_mesh(mesh, out / "mesh.ply")
        except EmptyMeshError as err:
            mesh_error = str(err)
            CONSOLE.print(f"[bold yellow]No mesh:[/bold yellow] {escape(str(err))}", soft_wrap=True)
            retry = f"rff-export-mesh --load-config {shlex.quote(str(config_path))} --threshold <value>"
            CONSOLE.print(f"Retry with: {retry}", soft_wrap=True, markup=False)

        summary = {
            "method": "rff-nerf-lite" + ("" if self.use_filter else " (filter off: MLP+PE)"),
            "steps": step + 1,
            "train_seconds": round(train_seconds, 1),
            "total_seconds": round(time.perf_counter() - started, 1),
            "test_metrics": metrics["mean"],
            "scene": str(scene),
            "config": str(config_path),
            "metrics": str(out / "eval" / "metrics.json"),
            "renders": str(out / "eval" / "renders"),
            "mesh": str(mesh_path) if mesh_path is not None else None,
            "mesh_triangles": len(mesh.triangles) if mesh is not None else 0,
            "mesh_error": mesh_error,
        }
        write_text(out / "summary.json", json.dumps(summary, indent=2))
        _print_summary(summary)
        return summary


def _progress_bar(total: int):
    """A trainer hook that shows a rich progress bar for the training steps."""
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from rff_field.common.progress import LoggedProgress

    def attach(trainer) -> None:
        progress = LoggedProgress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            TextColumn("{task.fields[info]}"),
            console=CONSOLE,
        )
        task = progress.add_task("Training", total=total, info="")
        progress.start()
        model = trainer.pipeline.model

        def advance(step: int) -> None:
            ls = getattr(model, "line_search", None)
            info = f"filter lr {ls.lr:.2e}" if ls is not None and ls.lr is not None else ""
            progress.update(task, completed=step + 1, info=info)
            if step + 1 >= total:
                progress.stop()

        trainer.callbacks.append(
            TrainingCallback(where_to_run=[TrainingCallbackLocation.AFTER_TRAIN_ITERATION], func=advance)
        )

    return attach


def _print_summary(summary: dict) -> None:
    from rich.table import Table

    m = summary["test_metrics"]
    table = Table(title=f"rff-demo finished in {summary['total_seconds']:.0f} s", show_header=False)
    table.add_row("Test PSNR / SSIM", f"{m['psnr']:.2f} dB / {m['ssim']:.4f}")
    if "lpips" in m:
        table.add_row("Test LPIPS", f"{m['lpips']:.4f}")
    table.add_row("Metrics", summary["metrics"])
    table.add_row("Renders", summary["renders"])
    if summary["mesh"] is not None:
        table.add_row("Mesh", f"{summary['mesh']} ({summary['mesh_triangles']} triangles)")
    else:
        table.add_row("Mesh", "not written (see above)")
    table.add_row("Run config", summary["config"])
    table.add_row("Scene", summary["scene"])
    CONSOLE.print(table)
    viewer = f"ns-viewer --load-config {shlex.quote(str(summary['config']))}"
    CONSOLE.print(f"Open it in the viewer:  {viewer}", soft_wrap=True, markup=False)


def run(args: Demo) -> int:
    """Run the demo; returns the exit status: 0, 2 for bad input, 1 when no mesh could be exported."""
    status, summary = call_main("rff-demo", args)
    if status == 0 and summary["mesh"] is None:
        status = 1
    return status


def entrypoint() -> None:
    """Entry point of ``rff-demo``."""
    from rff_field.nerf.quiet import quiet_known_warnings

    quiet_known_warnings()
    tyro.extras.set_accent_color("bright_yellow")
    with quiet_broken_pipe():
        sys.exit(run(parse_command(Demo, __doc__, command_arguments("rff-demo", sys.argv[1:]), prog="rff-demo")))


if __name__ == "__main__":
    entrypoint()
