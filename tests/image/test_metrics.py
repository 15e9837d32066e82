"""PSNR, SSIM and the optional LPIPS."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.ndimage import uniform_filter

from rff_field.image import metrics
from rff_field.image.metrics import image_metrics, lpips, psnr, psnr_from_mse, ssim


def test_psnr_values():
    assert psnr_from_mse(1e-2) == pytest.approx(20.0)
    assert psnr_from_mse(0.0) == math.inf
    assert float(psnr_from_mse(torch.tensor(1e-3))) == pytest.approx(30.0)
    a = torch.zeros(4, 4, 3)
    assert psnr(a + 0.1, a) == pytest.approx(20.0, abs=1e-4)


def test_ssim_identity_and_degradation():
    torch.manual_seed(0)
    image = torch.rand(32, 32, 3)
    assert ssim(image, image) == pytest.approx(1.0)
    assert ssim((image + 0.2 * torch.randn_like(image)).clamp(0, 1), image) < 0.9
    gray = torch.rand(16, 16, 1)
    assert ssim(gray, gray) == pytest.approx(1.0)
    tiny = torch.rand(5, 6, 3)
    assert ssim(tiny, tiny) == pytest.approx(1.0)  # window shrinks to fit


def test_lpips_unavailable_is_none_with_one_notice(lpips_offline, capsys):
    notices = []
    image = torch.rand(32, 32, 3)
    assert lpips(image, image, notices.append) is None
    assert lpips(image, image, notices.append) is None
    assert len(notices) == 1 and "LPIPS" in notices[0] and "\n" not in notices[0]
    result = image_metrics(image, image, with_lpips=True, notify=notices.append)
    assert set(result) == {"psnr", "ssim", "lpips"} and result["lpips"] is None and len(notices) == 1
    assert len(lpips_offline) == 1 and "Downloading" not in str(capsys.readouterr())


def test_lpips_runs_with_a_model_and_repeats_grayscale(monkeypatch):
    seen = []

    class Fake(torch.nn.Module):
        def forward(self, a, b):
            seen.append(a.shape)
            return (a - b).abs().mean()

    monkeypatch.setattr(metrics, "_lpips_model", Fake())
    value = lpips(torch.zeros(32, 32, 1), torch.ones(32, 32, 1))
    assert value == pytest.approx(1.0) and seen[0] == (1, 3, 32, 32)


def test_lpips_left_out_with_a_notice_below_alexnets_smallest_side(monkeypatch):
    from torchmetrics.functional.image.lpips import Alexnet

    alexnet = Alexnet(pretrained=False)  # LPIPS's feature network, random weights: sizes are what matter
    side = metrics.LPIPS_MIN_SIDE
    alexnet(torch.rand(1, 3, side, side + 9))
    with pytest.raises(RuntimeError):
        alexnet(torch.rand(1, 3, side - 1, side + 9))

    class Fake(torch.nn.Module):
        def forward(self, a, b):
            return alexnet(a)[0].mean() * 0

    monkeypatch.setattr(metrics, "_lpips_model", Fake())
    notices = []
    assert lpips(torch.rand(side, side, 3), torch.rand(side, side, 3), notices.append) == 0 and not notices
    small = torch.rand(side - 1, 64, 3)
    result = image_metrics(small, small, with_lpips=True, notify=notices.append)
    assert result["lpips"] is None and result["ssim"] == pytest.approx(1.0)
    assert len(notices) == 1 and f"64x{side - 1}" in notices[0] and "\n" not in notices[0]


def uniform_window_ssim(prediction: np.ndarray, target: np.ndarray, side: int = 7) -> float:
    """SSIM as written by Wang et al. with a uniform side x side window, sample covariances, constants
    (0.01, 0.03) for data range 1, the border of half a window left out, and the mean over channels."""
    ssims = []
    for channel in range(target.shape[-1]):
        x, y = prediction[..., channel], target[..., channel]
        mean = lambda image: uniform_filter(image, side)  # noqa: E731
        unbiased = side**2 / (side**2 - 1)
        mx, my = mean(x), mean(y)
        vx, vy, cxy = (unbiased * (mean(a * b) - ma * mb) for a, b, ma, mb in ((x, x, mx, mx), (y, y, my, my),
                                                                             (x, y, mx, my)))  # fmt: skip
        c1, c2 = 0.01**2, 0.03**2
        s = ((2 * mx * my + c1) * (2 * cxy + c2)) / ((mx**2 + my**2 + c1) * (vx + vy + c2))
        border = side // 2
        ssims.append(s[border:-border, border:-border].mean())
    return float(np.mean(ssims))


def test_ssim_is_the_uniform_7x7_ssim_of_the_clamped_prediction():
    generator = torch.Generator().manual_seed(0)
    target = torch.rand(32, 32, 3, generator=generator)
    noisy = (target + 0.2 * torch.randn(32, 32, 3, generator=generator)).clamp(0, 1)
    assert ssim(noisy, target) == pytest.approx(uniform_window_ssim(noisy.double().numpy(), target.double().numpy()))
    brighter = target + 0.5  # a prediction above 1 is scored as displayed: clamped to [0, 1]
    clamped = brighter.clamp(0, 1).double().numpy()
    assert ssim(brighter, target) == pytest.approx(uniform_window_ssim(clamped, target.double().numpy()))


def test_lpips_is_built_for_images_in_0_1(monkeypatch):
    import torchmetrics.image.lpip

    from rff_field.common import lpips as lpips_module

    built = []

    class Recorded(torch.nn.Module):
        def __init__(self, **kwargs):
            super().__init__()
            built.append(kwargs)

    monkeypatch.setattr(torchmetrics.image.lpip, "LearnedPerceptualImagePatchSimilarity", Recorded)
    monkeypatch.setattr(lpips_module, "_failure", None)
    assert isinstance(lpips_module.load_lpips(lambda message: None), Recorded)
    assert built == [{"net_type": "alex", "normalize": True}]  # inputs in [0, 1], scaled to [-1, 1] by the metric
