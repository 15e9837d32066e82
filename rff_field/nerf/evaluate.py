"""Evaluate a loaded ``rff-nerf`` pipeline on its evaluation split: per-view metrics and renders."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import numpy as np
import torch
from nerfstudio.pipelines.base_pipeline import VanillaPipeline
from nerfstudio.utils import colormaps
from PIL import Image
from rich.progress import track

from rff_field.common.outputs import write_json


def _output(outputs: dict, key: str) -> torch.Tensor:
    """An output of the model; nerfstudio's vanilla-nerf names its final renderings ``<key>_fine``."""
    return outputs[key] if key in outputs else outputs[f"{key}_fine"]


def evenly_spaced(total: int, count: int) -> list[int]:
    """At most ``count`` distinct indices into ``total`` items, evenly spaced from the first to the last."""
    return np.unique(np.linspace(0, total - 1, count).round().astype(int)).tolist()


def synchronize(device: torch.device) -> None:
    """Wait for the device's kernels (CUDA), so that a timing covers them."""
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
        loader = [loader.get_camera(index) for index in evenly_spaced(len(loader), max_views)]
    renders = None
    if output_dir is not None:
        renders = Path(output_dir) / "renders"
        renders.mkdir(parents=True, exist_ok=True)
    views = []
    items = track(loader, description="Rendering the evaluation views", total=len(loader)) if progress else loader
    for camera, batch in items:
        index = int(batch["image_idx"])
        name = Path(dataset.image_filenames[index]).stem if dataset is not None else f"{index:04d}"
        synchronize(model.device)
        start = time.perf_counter()
        outputs = model.get_outputs_for_camera(camera=camera)
        synchronize(model.device)
        seconds = time.perf_counter() - start
        metrics, _ = model.get_image_metrics_and_images(outputs, batch)
        rgb, depth, accumulation = (_output(outputs, key) for key in ("rgb", "depth", "accumulation"))
        views.append({"view": name, **metrics, "render_seconds": seconds, "rays": int(rgb.shape[0] * rgb.shape[1])})
        if renders is not None:
            gt = model.renderer_rgb.blend_background(batch["image"].to(rgb.device))
            _save_png(gt[..., :3], renders / f"{name}_gt.png")
            _save_png(rgb, renders / f"{name}_rgb.png")
            _save_png(colormaps.apply_depth_colormap(depth, accumulation=accumulation), renders / f"{name}_depth.png")
    keys = [k for k in views[0] if k != "view"] if views else []
    mean = {k: float(np.mean([v[k] for v in views])) for k in keys}
    result = {"mean": mean, "num_views": len(views), "views": views}
    if output_dir is not None:
        write_json(Path(output_dir) / "metrics.json", result, indent=2)  # NaN (LPIPS offline) as null
    return result
