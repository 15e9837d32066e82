"""Figures of image fits: ground truth, fit and error side by side; the PSNR and filter-rate curves; a bench's grid."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from jaxtyping import Float
from torch import Tensor

from rff_field.common.outputs import new_figure, save_figure


def show(ax, pixels: np.ndarray, title: str, **imshow) -> object:
    """``pixels`` ``[H, W, C]`` in [0, 1] (or ``[H, W]`` with ``imshow``'s colour map) on ``ax`` without ticks."""
    if pixels.ndim == 3:
        pixels, imshow = (pixels[..., 0], dict(cmap="gray", vmin=0, vmax=1)) if pixels.shape[-1] == 1 else (pixels, {})
    shown = ax.imshow(np.clip(pixels, 0, 1) if not imshow else pixels, **imshow)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([])
    ax.set_yticks([])
    return shown


def plot_comparison(
    target: Float[Tensor, "H W C"], fit: Float[Tensor, "H W C"], title: str, path: Path, error_vmax: float = 0.1
) -> None:
    """Ground truth, fit and absolute error (mean over channels, ``error_vmax`` at the top of the scale) in a row."""
    height, width = target.shape[:2]
    fig, axes = new_figure(1, 3, figsize=(3 * 3.6, 3.6 * height / width + 0.6))
    true, fitted = target.numpy(), fit.clamp(0, 1).numpy()
    show(axes[0], true, "ground truth")
    show(axes[1], fitted, "fit")
    error = np.abs(fitted - true).mean(-1)
    shown = show(axes[2], error, "absolute error", cmap="inferno", vmin=0, vmax=error_vmax)
    fig.colorbar(shown, ax=axes[2], fraction=0.046, pad=0.02)
    fig.suptitle(title)
    save_figure(fig, path, dpi=120)


def plot_curves(metrics: dict, path: Path) -> None:
    """PSNR over iterations and, with a filter, its learning rate over steps."""
    rates = metrics.get("filter_lr_history")
    fig, axes = new_figure(1, 2 if rates else 1, figsize=(10 if rates else 5, 3.6), squeeze=False)
    psnrs = np.array([np.nan if p is None else p for p in metrics["psnr_history"]], dtype=float)
    axes[0, 0].plot(np.arange(1, len(psnrs) + 1), psnrs, lw=1)
    axes[0, 0].set(xlabel="iteration", ylabel="PSNR (dB)", title=f"{metrics['method']} on {metrics['image']}")
    if rates:
        axes[0, 1].plot(np.arange(1, len(rates) + 1), rates, lw=1)
        title = "line search" if metrics.get("line_search_history") else "constant / scheduled"
        axes[0, 1].set(xlabel="step", ylabel="filter lr", yscale="log" if min(rates) > 0 else "linear", title=title)
    for ax in axes[0]:
        ax.grid(alpha=0.3)
    save_figure(fig, path, dpi=120)


def plot_bench(out: Path, rows: list[dict]) -> None:
    """``results.png``: every finished job's fit, a row per image and a column per variant, with its PSNR."""
    images = list(dict.fromkeys(row["input"] for row in rows))
    variants = list(dict.fromkeys(row["variant"] for row in rows))
    fig, axes = new_figure(len(images), len(variants), figsize=(2.4 * len(variants), 2.0 * len(images) + 0.4),
                           squeeze=False)  # fmt: skip
    for ax in axes.flat:
        ax.axis("off")
    from PIL import Image

    for row in rows:
        ax = axes[images.index(row["input"]), variants.index(row["variant"])]
        pixels = np.asarray(Image.open(out / "runs" / row["input"] / row["variant"] / "reconstruction.png"))
        pixels = (pixels[..., None] if pixels.ndim == 2 else pixels) / 255.0
        show(ax, pixels, f"{row['variant']}\n{row['input']}: {row['psnr']:.2f} dB" if row.get("psnr") else "")
    save_figure(fig, out / "results.png", dpi=100)
