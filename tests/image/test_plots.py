"""Figures of an image fit: the crop windows and the crop figure."""

from __future__ import annotations

import imageio.v3 as iio
import numpy as np
import pytest
import torch

from rff_field.image.plots import detail_window, plot_crops


def test_the_detail_window_holds_the_edges_and_the_flat_window_none():
    image = torch.zeros(32, 32, 3)
    image[:, 24:] = torch.arange(8).float().remainder(2)[None, :, None]  # stripes in the right quarter only
    top, left = detail_window(image, 8)
    assert left >= 16  # a window overlapping the stripes
    top, left = detail_window(image, 8, flat=True)
    assert left + 8 <= 24  # a window left of them


@pytest.mark.parametrize("flat", [False, True])
def test_crops_of_an_image_smaller_than_the_default_window(tmp_path, flat):
    target = torch.rand(6, 8, 3)
    run = tmp_path / "run"
    run.mkdir()
    iio.imwrite(run / "reconstruction.png", (target.numpy() * 255).astype(np.uint8))
    plot_crops(target, [("mlp-pe", run, {"psnr": 20.0, "best_psnr": 21.0})], tmp_path / "crops.png", flat=flat)
    assert iio.imread(tmp_path / "crops.png").ndim == 3
