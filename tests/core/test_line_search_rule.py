"""One test per branch of the step-size rule (docs/method.md)."""

import math

import pytest
import torch

from rff_field.core.errors import UsageError
from rff_field.core.optim import LineSearchConfig
from rff_field.core.step_rule import (
    BRANCHES,
    balanced_step_size,
    balanced_step_size_tensor,
    filter_step_branch,
    filter_step_size,
    filter_step_size_tensor,
)


def test_inr_step_alone_reaches_zero_gives_lr_min():
    # k = 1 + eps >= 0, b = 0.1 - 0.2 = -0.1 <= 0
    assert filter_step_size(0.1, d_filter=-1.0, d_inr=-1.0, lr_inr=0.2) == 0.0
    assert filter_step_size(0.1, -1.0, -1.0, 0.2, lr_min=1e-5) == 1e-5


def test_descent_direction_gives_the_zero_crossing_of_the_linear_model():
    # k >= 0, b >= 0: rate = b / k inside the bounds
    rate = filter_step_size(1e-3, d_filter=-2.0, d_inr=-0.5, lr_inr=1e-3)
    assert rate == pytest.approx((1e-3 - 0.5e-3) / (2.0 + 1e-6))


def test_rate_is_clipped_at_the_upper_bound():
    assert filter_step_size(1.0, -1.0, 0.0, 0.0) == 1e-3
    assert filter_step_size(1.0, -1.0, 0.0, 0.0, lr_max=0.5) == 0.5


def test_rate_is_clipped_at_the_lower_bound():
    assert filter_step_size(1e-6, -1.0, 0.0, 0.0, lr_min=1e-4) == 1e-4


def test_uphill_filter_with_negative_offset_uses_abs_ratio():
    # k = -0.5 + eps <= 0 and b = 0.1 - 0.3 <= 0: rate = |b / k|
    rate = filter_step_size(0.1, d_filter=0.5, d_inr=-3.0, lr_inr=0.1, lr_max=1.0)
    assert rate == pytest.approx(0.2 / (0.5 - 1e-6))


def test_uphill_filter_with_positive_offset_gives_lr_min():
    # k < 0 and b > 0: the filter's direction is predicted to go uphill
    assert filter_step_size(0.1, d_filter=0.5, d_inr=0.0, lr_inr=0.0, lr_max=1.0) == 0.0
    assert filter_step_size(0.1, 0.5, 0.0, 0.0, lr_min=2e-4, lr_max=1.0) == 2e-4


def test_zero_slope_model_is_caught_by_the_sufficient_decrease_check():
    # d_filter = eps makes k exactly 0: b / k is infinite and would be clipped to lr_max, but the filter's
    # direction is (slightly) uphill, so the sufficient-decrease check moves the rate back down to lr_min.
    assert filter_step_size(0.5, d_filter=1e-6, d_inr=0.0, lr_inr=0.0, lr_max=0.3) == 0.0
    assert filter_step_size(0.5, d_filter=1e-6, d_inr=0.0, lr_inr=0.0, lr_min=1e-5, lr_max=0.3) == 1e-5


def test_sufficient_decrease_holds_and_keeps_the_rate():
    loss, d_a, d_i, lr_i = 1.0, -1.0, 0.5, 1.0  # INR uphill, filter downhill
    rate = filter_step_size(loss, d_a, d_i, lr_i, lr_max=10.0)
    assert rate == pytest.approx(1.5 / (1 + 1e-6))
    assert rate * d_a + lr_i * d_i <= 0


def test_sufficient_decrease_violated_moves_rate_to_the_boundary():
    # d_filter slightly positive but within eps, so k >= 0: b / k = 2e-3 would increase the loss;
    # the check moves the rate to -lr_inr * d_inr / d_filter = 2e-6.
    loss, d_a, d_i, lr_i = 1e-9, 5e-7, -1e-12, 1.0
    rate = filter_step_size(loss, d_a, d_i, lr_i, lr_max=1.0)
    assert rate == pytest.approx(1e-12 / 5e-7)
    assert (1 - 1e-3) * (rate * d_a + lr_i * d_i) <= 1e-24


def test_sufficient_decrease_fix_is_clipped_to_the_bounds():
    # INR uphill, filter rate capped at lr_max: moving up to satisfy the check is clipped back to lr_max.
    assert filter_step_size(1.0, -1.0, 0.5, 1.0, lr_max=0.1) == 0.1


@pytest.mark.parametrize(
    "args",
    [
        (math.nan, -1.0, -1.0, 1e-3),
        (0.1, math.inf, -1.0, 1e-3),
        (0.1, -1.0, -math.inf, 1e-3),
        (0.1, -1.0, -1.0, math.nan),
        (torch.tensor(float("nan")), -1.0, -1.0, 1e-3),
    ],
)
def test_non_finite_inputs_give_lr_min(args):
    assert filter_step_size(*args) == 0.0
    assert filter_step_size(*args, lr_min=1e-6) == 1e-6


def test_accepts_zero_dim_tensors_and_returns_float():
    rate = filter_step_size(torch.tensor(1e-3), torch.tensor(-2.0), torch.tensor(0.0), torch.tensor(0.0))
    assert isinstance(rate, float) and rate == pytest.approx(1e-3 / (2 + 1e-6))


def test_balance_rule_equalises_predicted_decreases():
    from rff_field.core.step_rule import balanced_step_size

    rate = balanced_step_size(d_filter=-0.05, d_inr=-2e-3, lr_inr=1e-3, lr_max=1.0)
    assert rate == pytest.approx(1e-3 * 2e-3 / 0.05)
    assert rate * -0.05 == pytest.approx(1e-3 * -2e-3)
    assert balanced_step_size(-1e-9, -1.0, 1.0) == 1e-3  # clipped at lr_max
    assert balanced_step_size(0.1, -1.0, 1e-3) == 0.0  # filter uphill
    assert balanced_step_size(-0.1, 1.0, 1e-3, lr_min=1e-6) == 1e-6  # INR uphill
    assert balanced_step_size(math.nan, -1.0, 1e-3) == 0.0


@pytest.mark.parametrize(
    "inputs, bounds, expected",
    [
        ((float("nan"), -1.0, 0.0, 1.0), {}, (0.0, "nonfinite", False)),
        ((1.0, -1.0, -2.0, 1.0), {}, (0.0, "inr_reaches_zero", False)),  # b = 1 - 2 < 0 <= k
        ((0.5, -1000.0, 0.0, 1.0), {"eps": 0.0}, (5e-4, "crossing", False)),  # b / k = 0.5 / 1000
        ((1.0, -1.0, 0.0, 1.0), {}, (1e-3, "crossing_above_max", False)),
        ((0.01, -1000.0, 0.0, 1.0), {"lr_min": 1e-4, "eps": 0.0}, (1e-4, "crossing_below_min", False)),
        ((1.0, 1.0, 0.0, 1.0), {}, (0.0, "uphill", False)),  # k = -1 + eps < 0 < b
        ((1.0, 0.5, 0.0, 1.0), {"eps": 0.5}, (0.0, "k_zero", True)),  # lr_max * 0.5 > 0 fails Armijo: -0 / 0.5
        ((1.0, -1.0, 0.5, 1.0), {}, (1e-3, "crossing_above_max", True)),  # Armijo's rate 0.5, clipped
    ],
)
def test_branch_is_the_one_the_inputs_select(inputs, bounds, expected):
    rate, branch, armijo = filter_step_branch(*inputs, **bounds)
    assert (branch, armijo) == expected[1:] and branch in BRANCHES
    assert rate == pytest.approx(expected[0], rel=1e-12, abs=0)
    assert rate == filter_step_size(*inputs, **bounds)


def test_edges_of_the_branches():
    # k = b = 0: the INR's step alone reaches zero loss, so the filter does not move.
    assert filter_step_branch(1.0, 1e-6, -1.0, 1.0) == (0.0, "inr_reaches_zero", False)
    # The crossing exactly at lr_max is inside the bounds: the branch counts of the scale study name it so.
    assert filter_step_branch(1.0, -1000.0, 0.0, 1.0, eps=0.0) == (1e-3, "crossing", False)


def test_inputs_the_rule_cannot_use_are_refused():
    with pytest.raises(UsageError, match="INR's learning rate must be >= 0"):
        filter_step_size(1.0, -1.0, -1.0, -1e-3)
    with pytest.raises(UsageError, match="0 <= lr_min <= lr_max"):
        filter_step_size(1.0, -1.0, -1.0, 1e-3, lr_min=1.0, lr_max=0.5)
    LineSearchConfig(lr_min=1e-3, lr_max=1e-3).check()  # equal bounds: a fixed rate, allowed


def test_the_balance_rule_keeps_its_lower_bound():
    assert balanced_step_size(-1.0, -1e-9, 1.0, lr_min=1e-6) == 1e-6
    tensor = balanced_step_size_tensor(torch.tensor(-1.0), torch.tensor(-1e-9), torch.tensor(1.0), lr_min=1e-6)
    assert float(tensor) == 1e-6


def test_the_tensor_rule_computes_in_float64_from_float32_inputs():
    inputs = [torch.tensor(v, dtype=torch.float32) for v in (0.3, -0.0123, -0.02, 0.7)]
    rate = filter_step_size_tensor(*inputs, lr_max=1.0)
    assert rate.dtype == torch.float64
    assert float(rate) == filter_step_size(*(float(v) for v in inputs), lr_max=1.0)


def test_the_armijo_constant_changes_no_rate_under_the_linear_model():
    generator = torch.Generator().manual_seed(0)
    inputs = (torch.randn(2000, 3, generator=generator, dtype=torch.float64) * torch.tensor([1.0, 1e-2, 1e-2])).tolist()
    for loss, d_filter, d_inr in inputs:
        rates = {filter_step_size(abs(loss), d_filter, d_inr, 1.0, lr_max=1.0, c1=c1) for c1 in (0.0, 1e-3, 0.5, 0.99)}
        assert len(rates) == 1
    checked = [filter_step_branch(abs(loss), d_filter, d_inr, 1.0, lr_max=1.0)[2] for loss, d_filter, d_inr in inputs]
    assert 0 < sum(checked) < len(inputs)  # the check replaced some rates and kept others
