"""The divergence check: what went non-finite, at which step, and the model put back to its last finite state."""

import pytest
import torch
from torch import nn

from rff_field.core.divergence import LastFiniteState, divergence_message, nonfinite_counts
from rff_field.core.errors import TrainingDiverged


def test_counts_and_message():
    counts = nonfinite_counts({"filter": [torch.tensor([1.0, float("nan"), float("inf")])], "INR": [torch.ones(4)]})
    assert counts == {"filter": 2, "INR": 0}
    message = divergence_message(7, float("nan"), counts, ["a lower --lr (now 1e+06)"], "kept X")
    assert message == (
        "training diverged at step 7: the loss is nan; 2 filter parameters are not finite; try a lower --lr "
        "(now 1e+06); kept X"
    )


def test_a_finite_check_keeps_the_state_and_a_diverged_one_restores_it():
    model = nn.Linear(3, 2)
    guard = LastFiniteState(model, {"INR": list(model.parameters())}, ["a lower --lr"])
    with torch.no_grad():
        model.weight.fill_(2.0)
    guard.check(10, torch.tensor([1.0, 0.5]))  # steps 0..9 were finite: the state of step 10 is copied
    with torch.no_grad():
        model.weight.fill_(float("nan"))
    with pytest.raises(TrainingDiverged) as info:
        guard.check(14, torch.tensor([0.4, float("inf"), float("nan"), 0.3]))  # steps 10..13: step 10's loss finite
    assert str(info.value).startswith("training diverged at step 11: the loss is inf; 6 INR parameters")
    assert "the model of step 10, the last sound one, was kept" in str(info.value)
    assert torch.equal(model.weight, torch.full((2, 3), 2.0))


def test_parameters_that_turn_non_finite_after_finite_losses_are_caught():
    model = nn.Linear(2, 1)
    guard = LastFiniteState(model, {"filter": [model.weight], "INR": [model.bias]}, ["a lower --lr"])
    with torch.no_grad():
        model.bias.fill_(float("nan"))
    with pytest.raises(TrainingDiverged, match="at step 4: 1 INR parameters are not finite"):
        guard.check(5, torch.ones(5))
    assert bool(torch.isfinite(model.bias).all())


def test_a_state_whose_own_loss_is_not_finite_is_not_kept():
    """The copy taken at a check is kept only once the loss it gave (the first one after the check) is finite."""
    model = nn.Linear(3, 2)
    guard = LastFiniteState(model, {"INR": list(model.parameters())}, ["a lower --lr"])
    for step, value in ((1, 1.0), (2, 2.0)):
        with torch.no_grad():
            model.weight.fill_(value)
        guard.check(step, torch.tensor([0.5]))  # every step checked, as with --log-every 1
    with torch.no_grad():
        model.weight.fill_(1e30)  # finite parameters whose loss overflows
    guard.check(3, torch.tensor([0.5]))
    with pytest.raises(TrainingDiverged, match="at step 3: the loss is inf; try a lower --lr; the model of step 2"):
        guard.check(4, torch.tensor([float("inf")]))
    assert torch.equal(model.weight, torch.full((2, 3), 2.0)) and guard.step == 2


def test_a_finite_loss_that_blows_up_counts_as_diverged():
    model = nn.Linear(3, 2)
    guard = LastFiniteState(model, {"INR": list(model.parameters())}, ["a lower --lr"], blowup=100.0)
    guard.check(2, torch.tensor([0.5, 40.0]))  # 80 times the first loss: spikes below the ceiling are training
    with torch.no_grad():
        model.weight.fill_(3.0)
    guard.check(4, torch.tensor([1.0, 2.0]))
    with pytest.raises(TrainingDiverged) as info:
        guard.check(6, torch.tensor([49.0, 51.0]))  # 102 times the first loss, finite
    assert str(info.value).startswith("training diverged at step 5: the loss rose to 51, 1e+02 times its first")
    assert "the model of step 4, the last sound one, was kept" in str(info.value)
    assert torch.equal(model.weight, torch.full((2, 3), 3.0))


def test_a_first_loss_of_zero_sets_no_ceiling():
    model = nn.Linear(1, 1)
    guard = LastFiniteState(model, {"INR": list(model.parameters())}, ["a lower --lr"])
    guard.check(3, torch.tensor([0.0, 1e3, 1e30]))  # would be 1e30 times the first loss of a nonzero start
    assert guard.diverged_at is None
    with pytest.raises(TrainingDiverged, match="at step 3"):  # the ceiling is gone, the finiteness check is not
        guard.check(4, torch.tensor([float("nan")]))
