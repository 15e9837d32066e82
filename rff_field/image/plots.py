"""Figures of the image benchmark: reconstruction crops side by side, PSNR/filter-rate curves, the sweep."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from rff_field.common.outputs import new_figure, save_figure


def legend(ax, **kwargs) -> None:
    """``ax.legend(**kwargs)`` where the axes have labelled artists (matplotlib warns on an empty legend)."""
    if ax.get_legend_handles_labels()[1]:
        ax.legend(**kwargs)


def detail_window(image: Float[Tensor, "H W C"], size: int, flat: bool = False) -> tuple[int, int]:
    """Top-left corner of the ``size`` x ``size`` window with the most gradient energy (an edge-rich crop), or the
    least (``flat``: where high-frequency noise of a reconstruction shows)."""
    gray = image.float().mean(dim=-1)
    energy = torch.zeros_like(gray)
    energy[:, 1:] += (gray[:, 1:] - gray[:, :-1]).abs()
    energy[1:, :] += (gray[1:, :] - gray[:-1, :]).abs()
    pooled = torch.nn.functional.avg_pool2d(energy[None, None], size, stride=max(1, size // 4))[0, 0]
    row, col = divmod(int(torch.argmin(pooled) if flat else torch.argmax(pooled)), pooled.shape[1])
    stride = max(1, size // 4)
    return row * stride, col * stride


def _read_png(path: Path) -> np.ndarray:
    import imageio.v3 as iio

    array = np.asarray(iio.imread(path)).astype(np.float32) / 255.0
    return array if array.ndim == 3 else array[..., None]


def _show(ax, array: np.ndarray) -> None:
    if array.shape[-1] == 1:
        ax.imshow(array[..., 0], cmap="gray", vmin=0, vmax=1)
    else:
        ax.imshow(np.clip(array, 0, 1))
    ax.set_xticks([])
    ax.set_yticks([])


def plot_crops(
    target: Float[Tensor, "H W C"],
    runs: list[tuple[str, Path, Optional[dict]]],
    path: Path,
    title: str = "",
    size: Optional[int] = None,
    flat: bool = False,
) -> None:
    """The full target with the crop marked, the target's crop, and every run's crop with its PSNR.

    Args:
        target: The fitted image.
        runs: (label, folder holding reconstruction.png, metrics or None) per method.
        path: Output PNG.
        title: Figure title.
        size: Crop side in pixels (default: half the short side; a quarter for ``flat``).
        flat: Crop the flattest region instead of the most detailed one.
    """
    from matplotlib.patches import Rectangle

    height, width = target.shape[:2]
    size = min(size or max(8, min(height, width) // (4 if flat else 2)), height, width)
    top, left = detail_window(target, size, flat)
    gt = target.numpy()
    panels = [("target", gt, None, True), ("target (crop)", gt, None, False)]
    for label, folder, metrics in runs:
        png = folder / "reconstruction.png"
        if png.exists():
            panels.append((label, _read_png(png), metrics, False))
    cols = min(6, len(panels))
    rows = -(-len(panels) // cols)
    fig, axes = new_figure(rows, cols, figsize=(2.4 * cols, 2.9 * rows), squeeze=False)
    for ax in axes.flat:
        ax.axis("off")
    for ax, (label, image, metrics, full) in zip(axes.flat, panels):
        ax.axis("on")
        if full:
            _show(ax, image)
            ax.add_patch(Rectangle((left - 0.5, top - 0.5), size, size, fill=False, color="red", lw=1.2))
        else:
            _show(ax, image[top : top + size, left : left + size])
        caption = label if metrics is None else f"{label}\n{_db(metrics['best_psnr'])} / {_db(metrics['psnr'])} dB"
        ax.set_title(caption, fontsize=8)
    kind = "flat-region crops" if flat else "crops"
    fig.suptitle(f"{title}: {kind} (best / final PSNR)" if title else f"{kind} (best / final PSNR)", fontsize=10)
    save_figure(fig, path, dpi=130)


def history_series(values: Optional[list]) -> tuple[np.ndarray, np.ndarray]:
    """Iterations (1-based) and values of a ``*_history`` list from metrics.json: one value per iteration, or
    ``[iteration, value]`` pairs where a history was thinned. None is NaN."""
    values = values or []
    if values and isinstance(values[0], list):
        steps = np.array([v[0] + 1 for v in values], dtype=float)
        values = [v[1] for v in values]
    else:
        steps = np.arange(1, len(values) + 1, dtype=float)
    return steps, np.array([np.nan if v is None else v for v in values], dtype=float)


def plot_bench_curves(runs: list[tuple[str, Path, Optional[dict]]], path: Path, title: str = "") -> None:
    """PSNR over iterations of every run, and the filter's learning rate of the filtered ones."""
    runs = [r for r in runs if r[2] is not None]
    with_lr = [r for r in runs if r[2].get("filter_lr_history")]
    fig, axes = new_figure(1, 2 if with_lr else 1, figsize=(13 if with_lr else 7, 4.2), squeeze=False)
    ax = axes[0, 0]
    colours = {}
    for label, _, metrics in runs:
        (line,) = ax.plot(*history_series(metrics["psnr_history"]), lw=0.9, label=label)
        colours[label] = line.get_color()  # the same run in the same colour in both panels
    ax.set_xlabel("iteration")
    ax.set_ylabel("PSNR (dB)")
    ax.set_title(f"{title}: training PSNR" if title else "training PSNR")
    ax.grid(alpha=0.3)
    legend(ax, fontsize=7, ncol=2)
    if with_lr:
        ax = axes[0, 1]
        for label, _, metrics in with_lr:
            ax.plot(*history_series(metrics["filter_lr_history"]), lw=0.9, label=label, color=colours[label])
        ax.set_xlabel("iteration")
        ax.set_ylabel("filter learning rate")
        ax.set_yscale("symlog", linthresh=1e-6)
        ax.set_title("filter learning rate")
        ax.grid(alpha=0.3)
        legend(ax, fontsize=7)
    save_figure(fig, path, dpi=120)


def plot_sweep(rows: list[dict], path: Path) -> None:
    """Best (solid) and final (dashed) PSNR over RFF sigma and over log-linear PE scale, averaged over images."""
    panels = [
        ("rff_sigma", "RFF sigma", ("mlp-rff", "filtered-rff")),
        ("pe_scale", "log-linear PE scale", ("mlp-pe", "filtered-pe")),
    ]
    panels = [p for p in panels if any(r["method"] in p[2] for r in rows)]
    fig, axes = new_figure(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    for ax, (key, xlabel, methods) in zip(axes.flat, panels):
        for method, color in zip(methods, ("tab:blue", "tab:red")):
            mine = [r for r in rows if r["method"] == method]
            xs = sorted({r[key] for r in mine})
            for measure, style in (("best_psnr", "-o"), ("psnr", "--")):
                ys = [np.mean([r[measure] for r in mine if r[key] == x and r[measure] is not None]) for x in xs]
                ax.plot(xs, ys, style, color=color, label=f"{method} ({'best' if measure == 'best_psnr' else 'final'})")
        ax.set_xscale("log")
        ticks = sorted({r[key] for r in rows if r["method"] in methods})
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel(xlabel)
        ax.set_ylabel("PSNR (dB)")
        ax.grid(alpha=0.3)
        legend(ax, fontsize=8)
    images = sorted({r["image"] for r in rows})
    fig.suptitle(f"Robustness: {', '.join(images)}, {rows[0]['iters']} iterations", fontsize=10)
    save_figure(fig, path, dpi=120)


def _db(value) -> str:
    return "–" if value is None else f"{value:.2f}"
