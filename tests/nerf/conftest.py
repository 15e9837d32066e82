"""Fixtures of the NeRF tests: tiny generated scenes and one small trained rff-nerf-lite run that they share."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rff_field.nerf import quiet_known_warnings
from rff_field.nerf.methods import rff_nerf_config
from rff_field.nerf.synthetic_scene import CaptureSpec, SceneSpec, write_blender_scene, write_nerfstudio_capture
from rff_field.nerf.training import run_config, train_in_process
from tests import REPO

quiet_known_warnings()
STEPS = 24
LOG_EVERY = 4


def ns_command(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run a console script of the test's environment with this repository first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    command = [str(Path(sys.executable).parent / args[0]), *args[1:]]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=timeout)


def tiny_nerf(data: Path, output_dir: Path, steps: int = STEPS):
    """rff-nerf-lite shrunk to a fraction of a second per step, on the CPU."""
    config = run_config(rff_nerf_config(lite=True), data, output_dir, steps, experiment_name="tiny")
    config.machine.device_type = "cpu"
    config.pipeline.datamanager.train_num_rays_per_batch = config.pipeline.datamanager.eval_num_rays_per_batch = 128
    model = config.pipeline.model
    model.num_coarse_samples = model.num_importance_samples = 16
    model.base_mlp_num_layers, model.base_mlp_layer_width, model.skip_connections = 2, 32, ()
    model.head_mlp_num_layers, model.head_mlp_layer_width = 1, 16
    model.embedding.num_frequencies = 6
    model.compute_lpips = False
    model.line_search.lr_max = 10.0  # wide bounds: the rule's own value, not just its bound
    config.logging.steps_per_log = LOG_EVERY
    config.steps_per_eval_batch = 10
    config.steps_per_eval_image = config.steps_per_eval_all_images = 10**9
    return config


@pytest.fixture(scope="session")
def scene(tmp_path_factory) -> Path:
    """A Blender-format scene of 16x16 pixels: 6 training, 2 validation and 2 test views."""
    spec = SceneSpec(image_size=16, num_train_views=6, num_val_views=2, num_test_views=2, supersample=1)
    return write_blender_scene(tmp_path_factory.mktemp("scene") / "scene", spec)


@pytest.fixture(scope="session")
def capture(tmp_path_factory) -> Path:
    """A nerfstudio-data capture of 10 views of 16x16 pixels."""
    spec = CaptureSpec(image_size=16, num_views=10, supersample=1)
    return write_nerfstudio_capture(tmp_path_factory.mktemp("capture") / "capture", spec)


@pytest.fixture(scope="session")
def trained(scene, tmp_path_factory) -> dict:
    """One small rff-nerf-lite run, shared: its config.yml, the model, and the filter group's rate after each step."""
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

    watched: dict = {"rates": []}

    def watch(trainer) -> None:
        watched["model"] = model = trainer.pipeline.model
        optimizer = trainer.optimizers.optimizers["filter"]

        def after_step(step: int) -> None:
            watched["rates"].append(float(torch.as_tensor(optimizer.param_groups[0]["lr"])))

        trainer.callbacks.append(TrainingCallback([TrainingCallbackLocation.AFTER_TRAIN_ITERATION], after_step))
        watched["line_search"] = lambda: model.line_search

    torch.manual_seed(0)
    config_path = train_in_process(tiny_nerf(scene, tmp_path_factory.mktemp("runs")), on_setup=watch)
    return {"config_path": config_path, **watched}
