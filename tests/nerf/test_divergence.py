"""The divergence check of NeRF training: where it reads the device, and what it stops on (a stub trainer)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from rff_field.core.errors import TrainingDiverged
from rff_field.nerf import divergence


def check_steps(tmp_path, losses: dict, start: int = 0, steps: int = 10, per_save: int = 1000, per_log: int = 10**6,
                nan_weights_at: int = -1, shut: list | None = None, ran: list | None = None,
                line_search=None, optimizers: dict | None = None) -> None:  # fmt: skip
    """Run the callback over ``steps`` steps from ``start``: ``losses`` maps a step to its loss (default 1); the
    parameters turn NaN at step ``nan_weights_at``; ``shut`` records the trainer's shutdown, ``ran`` the steps;
    ``line_search`` and ``optimizers`` (group name to rate) are the model's and trainer's configs."""
    model = SimpleNamespace(w=nn.Parameter(torch.ones(2)), config=SimpleNamespace(line_search=line_search), step=start)
    model.training_loss = lambda: torch.tensor(losses.get(model.step, 1.0))
    model.get_param_groups = lambda: {"fields": [model.w]}
    logging = SimpleNamespace(steps_per_log=per_log)
    rates = {name: {"optimizer": SimpleNamespace(lr=lr)} for name, lr in (optimizers or {}).items()}
    config = SimpleNamespace(steps_per_save=per_save, max_num_iterations=steps, logging=logging, optimizers=rates)
    trainer = SimpleNamespace(_start_step=start, config=config, checkpoint_dir=tmp_path)
    trainer.shutdown = lambda: (shut if shut is not None else []).append(True)
    callback = divergence.divergence_callback(model, SimpleNamespace(trainer=trainer))
    for step in range(start, start + steps):
        model.step = step
        (ran if ran is not None else []).append(step)
        if step == nan_weights_at:
            model.w.data.fill_(math.nan)
        callback.run_callback(step)


def test_a_resumed_run_reads_the_parameters_only_before_its_last_checkpoint(tmp_path, monkeypatch):
    scans = []
    monkeypatch.setattr(divergence, "nonfinite_counts", lambda groups: scans.append(1) or {})
    check_steps(tmp_path, {}, start=100, steps=10)  # resumed at step 100: it saves after step 109 only
    assert len(scans) == 1


def test_a_non_finite_loss_stops_training_at_the_next_logged_step(tmp_path):
    shut, ran = [], []
    with pytest.raises(TrainingDiverged, match="diverged at step 3: the loss is nan") as stopped:
        check_steps(tmp_path, {3: math.nan}, per_log=2, shut=shut, ran=ran)
    assert ran[-1] == 4 and shut == [True] and "no checkpoint was written" in str(stopped.value)


def test_non_finite_parameters_stop_training_before_a_checkpoint(tmp_path):
    check_steps(tmp_path, {}, per_save=4)  # sound: nothing stops it
    shut = []  # the parameters go non-finite in a step whose loss was finite; the next save is after step 4
    with pytest.raises(TrainingDiverged, match="diverged at step 4: 2 fields parameters are not finite"):
        check_steps(tmp_path, {}, per_save=4, nan_weights_at=2, shut=shut)
    assert shut == [True]


@pytest.mark.parametrize("searching", [True, False])
def test_the_message_names_the_rates_to_lower(tmp_path, searching):
    from rff_field.core.optim import LineSearchConfig

    line_search = LineSearchConfig(enabled=searching, lr_max=0.02)
    with pytest.raises(TrainingDiverged) as stopped:
        check_steps(tmp_path, {0: math.nan}, per_log=1, line_search=line_search,
                    optimizers={"fields": 5e-4, "filter": 3e-3})  # fmt: skip
    message = str(stopped.value)
    assert "a lower --optimizers.fields.optimizer.lr (now 0.0005)" in message
    assert ("a lower --optimizers.filter.optimizer.lr (now 0.003)" in message) == (not searching)
    assert ("a lower --pipeline.model.line-search.lr-max (now 0.02)" in message) == searching
