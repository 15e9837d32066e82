"""Render a loaded pipeline's evaluation views without the viewer: per-view metrics, renders and timing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from nerfstudio.pipelines.base_pipeline import VanillaPipeline
from nerfstudio.utils import colormaps
from nerfstudio.utils.rich_utils import CONSOLE
from rich.progress import track

from rff_field.common.outputs import save_image, write_json


@torch.no_grad()
def evaluate_views(
    pipeline: VanillaPipeline, output_dir: Optional[Path] = None, max_views: Optional[int] = None
) -> dict:
    """Metrics of the pipeline's evaluation views (at most ``max_views``, evenly spaced), as ``{"mean", "num_views",
    "views"}``; with ``output_dir``, also ``renders/<view>_{gt,rgb,depth}.png`` and ``metrics.json`` there."""
    model = pipeline.model
    model.eval()
    loader = pipeline.datamanager.fixed_indices_eval_dataloader  # type: ignore[attr-defined]
    names = pipeline.datamanager.eval_dataset.image_filenames
    picks = range(len(loader))
    if max_views is not None and max_views < len(loader):
        picks = np.unique(np.linspace(0, len(loader) - 1, max_views).round().astype(int)).tolist()
    renders = Path(output_dir) / "renders" if output_dir is not None else None
    if renders is not None:
        renders.mkdir(parents=True, exist_ok=True)
    views = []
    for index in track(picks, description="Rendering the test views", console=CONSOLE, transient=True):
        camera, batch = loader.get_camera(index)
        start = time.perf_counter()
        outputs = model.get_outputs_for_camera(camera=camera)
        if model.device.type == "cuda":
            torch.cuda.synchronize(model.device)
        seconds = time.perf_counter() - start
        metrics, _ = model.get_image_metrics_and_images(outputs, batch)
        name = Path(names[int(batch["image_idx"])]).stem
        rgb = outputs["rgb"]
        views.append({"view": name, **metrics, "render_seconds": seconds, "rays": rgb.shape[0] * rgb.shape[1]})
        if renders is not None:
            gt = model.renderer_rgb.blend_background(batch["image"].to(rgb.device))[..., :3]
            save_image(gt, renders / f"{name}_gt.png")
            save_image(rgb, renders / f"{name}_rgb.png")
            depth = colormaps.apply_depth_colormap(outputs["depth"], accumulation=outputs["accumulation"])
            save_image(depth, renders / f"{name}_depth.png")
    mean = {key: float(np.mean([view[key] for view in views])) for key in views[0] if key != "view"}
    result = {"mean": mean, "num_views": len(views), "views": views}
    if output_dir is not None:
        write_json(Path(output_dir) / "metrics.json", result)
    return result
