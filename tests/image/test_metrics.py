"""PSNR, SSIM and the optional LPIPS."""

from __future__ import annotations

import math

import pytest
import torch

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
