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


def _synchronize(device: torch.device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def _save_png(image: torch.Tensor, path: Path) -> None:
    array = (image.clamp(0, 1).cpu().numpy() * 255).round().astype(np.uint8)
    Image.fromarray(array).save(path)


@torch.no_grad()
def evaluate_views(
    pipeline: VanillaPipeline, output_dir: Optional[Path] = None, progress: bool = True, max_views: Optional[int] = None
) -> dict:
    """Render every view of the pipeline's evaluation split (the test split for ``test_mode='test'``).

    Args:
        pipeline: A pipeline loaded with ``eval_setup`` (or trained).
        output_dir: Where to write ``renders/<view>_{gt,rgb,depth}.png`` and ``metrics.json`` (None: nothing).
        progress: Show a progress bar.
        max_views: Render at most this many views, evenly spaced over the split (None: all).

    Returns:
        ``{"mean": {...}, "views": [{"view": name, "psnr": ..., "ssim": ..., ...}, ...]}``.
    """
    model = pipeline.model
    model.eval()
    loader = pipeline.datamanager.fixed_indices_eval_dataloader  # type: ignore[attr-defined]
    dataset = pipeline.datamanager.eval_dataset
    if max_views is not None and max_views < len(loader):
        picked = np.unique(np.linspace(0, len(loader) - 1, max_views).round().astype(int)).tolist()
        loader = [loader.get_camera(index) for index in picked]
    renders = None
    if output_dir is not None:
        renders = Path(output_dir) / "renders"
        renders.mkdir(parents=True, exist_ok=True)
    views = []
    items = track(loader, description="Rendering the evaluation views", total=len(loader)) if progress else loader
    for camera, batch in items:
        index = int(batch["image_idx"])
        name = Path(dataset.image_filenames[index]).stem if dataset is not None else f"{index:04d}"
        _synchronize(model.device)
        start = time.perf_counter()
        outputs = model.get_outputs_for_camera(camera=camera)
        _synchronize(model.device)
        seconds = time.perf_counter() - start
        metrics, _ = model.get_image_metrics_and_images(outputs, batch)
        rays = int(outputs["rgb"].shape[0] * outputs["rgb"].shape[1])
        views.append({"view": name, **metrics, "render_seconds": seconds, "rays": rays})
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
