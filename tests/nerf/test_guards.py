"""Nothing silently wrong in training: a non-finite loss and a field collapsed to zero density stop the run with one
line naming the rate to lower (ns-train: status 3), and no checkpoint of the bad state is written."""

from __future__ import annotations

import os
import signal

import pytest
import torch

from rff_field.core.errors import TrainingDiverged
from rff_field.nerf.trainer import COLLAPSE_STEPS
from rff_field.nerf.training import train_in_process
from tests.nerf.conftest import STEPS, tiny_nerf


def test_a_field_whose_density_is_zero_everywhere_stops_as_collapsed_naming_the_fields_rate(scene, tmp_path):
    config = tiny_nerf(scene, tmp_path, steps=COLLAPSE_STEPS + 20)
    config.optimizers["fields"]["optimizer"].lr = 1e-9  # the density cannot recover within the run

    def empty(trainer) -> None:
        for field in (trainer.pipeline.model.field_coarse, trainer.pipeline.model.field_fine):
            head = field.field_output_density.net  # softplus(-1e4) is 0 in float32: no ray meets any density
            head.weight.data.zero_()
            head.bias.data.fill_(-1e4)

    with pytest.raises(TrainingDiverged, match="collapsed") as stopped:
        train_in_process(config, on_setup=empty)
    assert "--optimizers.fields.optimizer.lr (now 1e-09)" in str(stopped.value)


def set_up_tiny_nerf(scene, tmp_path):
    """The set-up trainer of :func:`tiny_nerf`, for tests that call what ``ns-train`` runs."""
    config = tiny_nerf(scene, tmp_path)
    config.set_timestamp()
    config.prepare()
    trainer = config.setup(local_rank=0, world_size=1)
    trainer.setup()
    return trainer


def test_a_non_finite_loss_ends_ns_train_with_one_line_and_status_3_without_a_checkpoint(scene, tmp_path, capsys):
    trainer = set_up_tiny_nerf(scene, tmp_path)
    with torch.no_grad():
        next(trainer.pipeline.model.field_fine.parameters()).fill_(float("nan"))
    with pytest.raises(SystemExit) as ended:
        trainer.train()  # what ns-train runs
    assert ended.value.code == 3
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        "diverged" in line
        and "--optimizers.fields.optimizer.lr" in line
        and "--pipeline.model.line-search.lr-max" in line
    )
    assert not list(trainer.checkpoint_dir.glob("step-*.ckpt"))


def test_ctrl_c_ends_training_after_the_step_with_a_checkpoint(scene, tmp_path):
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

    def press_at_step_3(trainer) -> None:
        def press(step: int) -> None:
            if step == 3:
                os.kill(os.getpid(), signal.SIGINT)

        trainer.callbacks.append(TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], press))

    with pytest.raises(KeyboardInterrupt, match="interrupted"):
        train_in_process(tiny_nerf(scene, tmp_path), on_setup=press_at_step_3)
    (checkpoint,) = tmp_path.glob("*/*/*/nerfstudio_models/step-*.ckpt")
    assert int(checkpoint.stem.split("-")[1]) <= 4 < STEPS - 1  # the step after the last one trained, as nerfstudio


def test_ctrl_c_in_ns_train_saves_the_checkpoint_and_exits_130(scene, tmp_path, capsys):
    from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackLocation

    trainer = set_up_tiny_nerf(scene, tmp_path)

    def press(step: int) -> None:
        if step == 3:
            os.kill(os.getpid(), signal.SIGINT)

    trainer.callbacks.append(TrainingCallback([TrainingCallbackLocation.BEFORE_TRAIN_ITERATION], press))
    with pytest.raises(SystemExit) as ended:
        trainer.train()  # what ns-train runs
    trainer.shutdown()
    assert ended.value.code == 130
    assert "checkpoint" in capsys.readouterr().err.strip().splitlines()[-1]
    assert list(trainer.checkpoint_dir.glob("step-*.ckpt"))
