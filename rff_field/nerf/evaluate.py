"""Evaluate a loaded ``rff-nerf`` pipeline on its evaluation split: per-view metrics and renders."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from nerfstudio.pipelines.base_pipeline import VanillaPipeline
from nerfstudio.utils import colormaps
from PIL import Image
from rich.progress import track


def _save_png(image: torch.Tensor, path: Path) -> None:
    array = (image.clamp(0, 1).cpu().numpy() * 255).round().astype(np.uint8)
    Image.fromarray(array).save(path)


@torch.no_grad()
def evaluate_views(pipeline: VanillaPipeline, output_dir: Optional[Path] = None, progress: bool = True) -> dict:
    """Render every view of the pipeline's evaluation split (the test split for ``test_mode='test'``).

    Args:
        pipeline: A pipeline loaded with ``eval_setup`` (or trained).
        output_dir: Where to write ``renders/<view>_{gt,rgb,depth}.png`` and ``metrics.json`` (None: nothing).
        progress: Show a progress bar.

    Returns:
        ``{"mean": {...}, "views": [{"view": name, "psnr": ..., "ssim": ..., ...}, ...]}``.
    """
    model = pipeline.model
    model.eval()
    loader = pipeline.datamanager.fixed_indices_eval_dataloader  # type: ignore[attr-defined]
    dataset = pipeline.datamanager.eval_dataset
    renders = None
    if output_dir is not None:
        renders = Path(output_dir) / "renders"
        renders.mkdir(parents=True, exist_ok=True)
    views = []
    items = track(loader, description="Rendering the evaluation views", total=len(loader)) if progress else loader
    for camera, batch in items:
        index = int(batch["image_idx"])
        name = Path(dataset.image_filenames[index]).stem if dataset is not None else f"{index:04d}"
        start = time.perf_counter()
        outputs = model.get_outputs_for_camera(camera=camera)
        seconds = time.perf_counter() - start
        metrics, _ = model.get_image_metrics_and_images(outputs, batch)
        views.append({"view": name, **metrics, "render_seconds": seconds})
        if renders is not None:
            gt = model.renderer_rgb.blend_background(batch["image"].to(outputs["rgb"].device))
            _save_png(gt[..., :3], renders / f"{name}_gt.png")
            _save_png(outputs["rgb"], renders / f"{name}_rgb.png")
            depth = colormaps.apply_depth_colormap(outputs["depth"], accumulation=outputs["accumulation"])
            _save_png(depth, renders / f"{name}_depth.png")
    keys = [k for k in views[0] if k != "view"] if views else []
    mean = {k: float(np.mean([v[k] for v in views])) for k in keys}
    result = {"mean": mean, "num_views": len(views), "views": views}
    if output_dir is not None:
        (Path(output_dir) / "metrics.json").write_text(json.dumps(result, indent=2))
    return result
