"""Evaluation metrics: PSNR and SSIM always, LPIPS only when its weights load (one notice otherwise)."""

from __future__ import annotations

import torch
from nerfstudio.data.scene_box import SceneBox
from torch import nn

from rff_field.nerf.model import RFFNeRFModelConfig


def _model(**overrides):
    box = SceneBox(aabb=torch.tensor([[-1.5] * 3, [1.5] * 3]))
    config = RFFNeRFModelConfig(
        num_coarse_samples=4,
        num_importance_samples=4,
        base_mlp_num_layers=2,
        base_mlp_layer_width=8,
        skip_connections=(),
        head_mlp_layer_width=8,
        **overrides,
    )
    return config.setup(scene_box=box, num_train_data=1)


def _outputs_and_batch(h: int = 16, w: int = 16):
    torch.manual_seed(0)
    rgb = torch.rand(h, w, 3)
    outputs = {
        "rgb": rgb, "rgb_fine": rgb, "rgb_coarse": torch.rand(h, w, 3),
        "depth": torch.rand(h, w, 1), "depth_fine": torch.rand(h, w, 1), "depth_coarse": torch.rand(h, w, 1),
        "accumulation": torch.ones(h, w, 1), "accumulation_fine": torch.ones(h, w, 1),
        "accumulation_coarse": torch.ones(h, w, 1),
    }  # fmt: skip
    return outputs, {"image": (rgb + 0.05 * torch.randn(h, w, 3)).clamp(0, 1)}


def test_without_lpips_weights_one_notice_and_psnr_ssim(lpips_offline, capsys):
    model = _model()
    outputs, batch = _outputs_and_batch()
    for _ in range(3):
        metrics, images = model.get_image_metrics_and_images(outputs, batch)
    assert set(metrics) == {"psnr", "ssim", "coarse_psnr"}
    assert 20 < metrics["psnr"] < 35 and 0 < metrics["ssim"] < 1
    assert images["img"].shape == (16, 48, 3)
    assert len(lpips_offline) == 1  # tried once per process, not per image or model
    _model().get_image_metrics_and_images(outputs, batch)
    captured = capsys.readouterr()
    notices = [line for line in captured.out.splitlines() if "LPIPS skipped" in line]
    assert (
        len(notices) == 1
        and "Name or service not known" in notices[0]
        and "Downloading" not in captured.out + captured.err
    )
    assert len(lpips_offline) == 1


def test_lpips_used_when_available(monkeypatch):
    import torchmetrics.image.lpip as lpip

    from rff_field.common import lpips

    monkeypatch.setattr(lpips, "_failure", None)  # as if no earlier test had tried offline

    class FakeLPIPS(nn.Module):
        def forward(self, a, b):
            return (a - b).abs().mean()

    monkeypatch.setattr(lpip, "LearnedPerceptualImagePatchSimilarity", lambda **kw: FakeLPIPS())
    model = _model()
    metrics, _ = model.get_image_metrics_and_images(*_outputs_and_batch())
    assert 0 < metrics["lpips"] < 0.1
    assert not any("lpips" in k for k in model.state_dict())  # checkpoints do not depend on LPIPS


def test_lpips_can_be_switched_off(lpips_offline):
    metrics, _ = _model(compute_lpips=False).get_image_metrics_and_images(*_outputs_and_batch())
    assert "lpips" not in metrics and lpips_offline == []


def test_evaluation_of_one_view_leaves_out_undefined_spread(monkeypatch):
    from nerfstudio.pipelines.base_pipeline import VanillaPipeline

    from rff_field.nerf.pipeline import RFFPipeline

    def one_view(self, data_loader, image_prefix, step=None, output_path=None, get_std=False):
        values = {"psnr": torch.tensor([21.5]), "ssim": torch.tensor([0.75])}
        metrics = {}
        for key, value in values.items():
            std, mean = torch.std_mean(value)  # one view: std is NaN, as in nerfstudio's averaging
            metrics[key] = float(mean)
            if get_std:
                metrics[f"{key}_std"] = float(std)
        return metrics

    monkeypatch.setattr(VanillaPipeline, "get_average_image_metrics", one_view)
    pipeline = RFFPipeline.__new__(RFFPipeline)
    assert pipeline.get_average_image_metrics(None, "eval", get_std=True) == {"psnr": 21.5, "ssim": 0.75}
    assert pipeline.get_average_image_metrics(None, "eval") == {"psnr": 21.5, "ssim": 0.75}


def test_spread_of_several_views_is_kept():
    from rff_field.nerf.pipeline import without_undefined_std

    metrics = {"psnr": 21.5, "psnr_std": 0.5, "ssim": 0.75, "ssim_std": float("nan"), "fps": float("nan")}
    assert without_undefined_std(metrics) == {"psnr": 21.5, "psnr_std": 0.5, "ssim": 0.75, "fps": metrics["fps"]}


def test_the_eval_metrics_are_the_fine_renderings_and_coarse_psnr_the_coarse_ones():
    metrics, _ = _model(compute_lpips=False).get_image_metrics_and_images(*_outputs_and_batch())
    assert metrics["ssim"] > 0.5 and metrics["coarse_psnr"] < metrics["psnr"] - 10  # coarse: noise; fine: the image


def test_training_losses_are_both_levels_and_the_training_psnr_the_fine_ones():
    model = _model(compute_lpips=False)
    outputs, batch = _outputs_and_batch()
    losses = model.get_loss_dict(outputs, batch)
    assert set(losses) == {"rgb_loss_coarse", "rgb_loss_fine"}
    assert losses["rgb_loss_coarse"] > 10 * losses["rgb_loss_fine"]
    assert float(model.get_metrics_dict(outputs, batch)["psnr"]) > 20
