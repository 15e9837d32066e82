"""Slow: rff-nerf-lite on the real NeRF synthetic chair (the data folder) learns, and the demo at its defaults.

Run with ``pytest -m slow tests/nerf/test_slow.py`` (several minutes of CPU).
"""

from __future__ import annotations

import json

import pytest

from rff_field.nerf.model import RFFNeRFModel
from tests import SHARED_DATA

CHAIR = SHARED_DATA / "nerf_synthetic" / "chair"


@pytest.mark.slow
@pytest.mark.skipif(not CHAIR.exists(), reason=f"needs {CHAIR}")
def test_lite_learns_the_chair(tmp_path):
    from rff_field.nerf.evaluate import evaluate_views
    from rff_field.nerf.loading import load_rff_pipeline
    from rff_field.nerf.training import lite_config, train_in_process

    config = lite_config(CHAIR, tmp_path / "runs", 300, experiment_name="chair")
    config.pipeline.datamanager.camera_res_scale_factor = 0.125
    config.pipeline.model.compute_lpips = False
    config.steps_per_eval_image = config.steps_per_eval_all_images = 10**9
    losses = []

    def watch(trainer):
        model: RFFNeRFModel = trainer.pipeline.model
        from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

        trainer.callbacks.append(
            TrainingCallback(
                [TrainingCallbackLocation.AFTER_TRAIN_ITERATION],
                lambda step: losses.append(float(model.training_loss())),
            )
        )

    config_path = train_in_process(config, on_setup=watch)
    assert sum(losses[-50:]) / 50 < 0.5 * sum(losses[:10]) / 10
    _, pipeline, _, _ = load_rff_pipeline(config_path, test_mode="test")
    metrics = evaluate_views(pipeline, tmp_path / "eval", progress=False)
    assert metrics["num_views"] == 25
    assert metrics["mean"]["psnr"] > 18  # an all-white image scores 14.4 dB on these views


@pytest.mark.slow
def test_demo_defaults(tmp_path):
    from rff_field.cli.demo import Demo, run

    assert run(Demo(output_dir=tmp_path / "demo")) == 0
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert summary["test_metrics"]["psnr"] > 20 and summary["mesh_triangles"] > 1000
