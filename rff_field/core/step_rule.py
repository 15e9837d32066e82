"""The paper's rule for the filter's learning rate (Algorithm 1 + Armijo check), as pure functions of a few numbers.

``filter_step_size`` is the rule itself (see docs/method.md for the reading of the paper we implement);
``filter_step_size_tensor`` computes the same on tensors, so that training never waits for the host.
``balanced_step_size`` is a named deviation. :mod:`rff_field.core.line_search` feeds them every step.
"""

from __future__ import annotations

import math
from typing import Literal, Optional, Union

import torch
from torch import Tensor

from rff_field.core.errors import UsageError

Number = Union[float, Tensor]
Rule = Literal["paper", "balance"]


BRANCHES = ("nonfinite", "inr_reaches_zero", "k_zero", "crossing", "crossing_above_max", "crossing_below_min", "uphill")
"""The first branch of the rule that sets the rate (:func:`filter_step_branch`): a non-finite input; the INR's step
alone predicted to reach zero loss; ``k = 0``; the zero crossing ``abs(b / k)`` inside the bounds, above ``lr_max``
or below ``lr_min``; the filter's direction predicted uphill."""


def filter_step_size(
    loss: Number,
    d_filter: Number,
    d_inr: Number,
    lr_inr: Number,
    lr_min: float = 0.0,
    lr_max: float = 1e-3,
    eps: float = 1e-6,
    c1: float = 1e-3,
) -> float:
    """The filter's learning rate for this step.

    The next loss is modelled as linear in the filter's rate ``a``: ``loss(a) ~ b - k a`` with
    ``k = -d_filter + eps`` and ``b = loss + lr_inr * d_inr`` (the INR's own step included).

    Args:
        loss: This step's training loss.
        d_filter: Directional derivative of the loss along the filter's update direction (< 0 for descent).
        d_inr: Same for the INR's parameters.
        lr_inr: The INR's learning rate for this step.
        lr_min: Lower bound of the filter's rate.
        lr_max: Upper bound of the filter's rate.
        eps: Added to ``k`` (the paper's epsilon).
        c1: Sufficient-decrease constant of the Armijo check.

    Returns:
        The rate, in ``[lr_min, lr_max]``; ``lr_min`` whenever an input is not finite.

    Raises:
        UsageError: The bounds are not finite numbers with ``0 <= lr_min <= lr_max``, ``eps`` is not a finite
            number >= 0, ``c1`` is not in [0, 1), or ``lr_inr`` is negative.
    """
    return filter_step_branch(loss, d_filter, d_inr, lr_inr, lr_min, lr_max, eps, c1)[0]


def filter_step_branch(
    loss: Number,
    d_filter: Number,
    d_inr: Number,
    lr_inr: Number,
    lr_min: float = 0.0,
    lr_max: float = 1e-3,
    eps: float = 1e-6,
    c1: float = 1e-3,
) -> tuple[float, str, bool]:
    """:func:`filter_step_size` and how it got there: ``(rate, branch, armijo)``, ``branch`` one of
    :data:`BRANCHES`, ``armijo`` whether the sufficient-decrease check then replaced the rate."""
    check_bounds(lr_min, lr_max, eps, c1)
    loss, d_filter, d_inr, lr_inr = (float(v) for v in (loss, d_filter, d_inr, lr_inr))
    if lr_inr < 0:
        raise UsageError(f"the INR's learning rate must be >= 0, got {lr_inr}")
    if not all(math.isfinite(v) for v in (loss, d_filter, d_inr, lr_inr)):
        return lr_min, "nonfinite", False

    def clip(rate: float) -> float:
        return min(max(rate, lr_min), lr_max)

    k = -d_filter + eps
    b = loss + lr_inr * d_inr
    if k >= 0 and b <= 0:
        rate, branch = lr_min, "inr_reaches_zero"
    elif (k >= 0 and b >= 0) or (k <= 0 and b <= 0):
        if k == 0:
            rate, branch = lr_max, "k_zero"
        else:
            crossing = abs(b / k)
            rate = clip(crossing)
            branch = (
                "crossing_above_max" if crossing > lr_max else "crossing_below_min" if crossing < lr_min else "crossing"
            )
    else:
        rate, branch = lr_min, "uphill"

    # Sufficient decrease: (1 - c1)(rate * d_filter + lr_inr * d_inr) <= 0, linear in rate.
    armijo = (1 - c1) * (rate * d_filter + lr_inr * d_inr) > 0 and d_filter != 0
    if armijo:
        rate = -lr_inr * d_inr / d_filter
    return clip(rate), branch, armijo


def check_bounds(lr_min: float, lr_max: float, eps: float = 0.0, c1: float = 0.0) -> None:
    """Raise :class:`UsageError` unless ``0 <= lr_min <= lr_max`` are finite numbers, ``eps >= 0`` is finite and
    ``0 <= c1 < 1``."""
    if not (math.isfinite(lr_min) and math.isfinite(lr_max) and 0 <= lr_min <= lr_max):
        raise UsageError(f"the filter's rate bounds need 0 <= lr_min <= lr_max, both finite; got {lr_min}, {lr_max}")
    if not (math.isfinite(eps) and eps >= 0):
        raise UsageError(f"the rule's eps must be a finite number >= 0, got {eps}")
    if not 0 <= c1 < 1:
        raise UsageError(f"the Armijo constant c1 must lie in [0, 1), got {c1}")


def balanced_step_size(
    d_filter: Number, d_inr: Number, lr_inr: Number, lr_min: float = 0.0, lr_max: float = 1e-3
) -> float:
    """A deviation from the paper, named ``balance``: the rate at which the filter's predicted decrease equals
    the INR's, ``rate * d_filter = lr_inr * d_inr``.

    It is the boundary value of the paper's sufficient-decrease check, ``-lr_inr * d_inr / d_filter``, with the
    opposite sign. Unlike the paper's zero-crossing rule,
    whose ratio ``b / k`` sits orders of magnitude above ``lr_max`` in practice, it follows the INR's learning
    rate schedule and the ratio of the two slopes. Uphill or non-finite inputs give ``lr_min``.
    """
    check_bounds(lr_min, lr_max)
    d_filter, d_inr, lr_inr = (float(v) for v in (d_filter, d_inr, lr_inr))
    if not all(math.isfinite(v) for v in (d_filter, d_inr, lr_inr)):
        return lr_min
    if d_filter >= 0 or lr_inr * d_inr >= 0:
        return lr_min
    return min(max(lr_inr * d_inr / d_filter, lr_min), lr_max)


def float64_tensors(*values: Number, device: Optional[torch.device] = None) -> list[Tensor]:
    """``values`` as float64 tensors on ``device`` (default: that of the first tensor among them); numbers are
    filled in on that device (``torch.full``: no host-to-device copy)."""
    if device is None:
        device = next((v.device for v in values if isinstance(v, Tensor)), torch.device("cpu"))
    return [
        v.to(device=device, dtype=torch.float64)
        if isinstance(v, Tensor)
        else torch.full((), float(v), dtype=torch.float64, device=device)
        for v in values
    ]


def filter_step_size_tensor(
    loss: Number,
    d_filter: Number,
    d_inr: Number,
    lr_inr: Number,
    lr_min: float = 0.0,
    lr_max: float = 1e-3,
    eps: float = 1e-6,
    c1: float = 1e-3,
) -> Tensor:
    """:func:`filter_step_size` on tensors, elementwise, without reading a value on the host.

    The same branches, each evaluated everywhere and picked with ``torch.where``, in float64 with the same
    operations in the same order, so that it returns exactly what :func:`filter_step_size` returns. Inputs of any
    broadcastable shape (one rate per model of a batch); the result is a float64 tensor on their device.
    """
    check_bounds(lr_min, lr_max, eps, c1)
    loss, d_filter, d_inr, lr_inr = float64_tensors(loss, d_filter, d_inr, lr_inr)
    k = -d_filter + eps
    b = loss + lr_inr * d_inr
    ratio = torch.where(k == 0, lr_max, (b / k).abs().clamp(lr_min, lr_max))
    inr_alone = (k >= 0) & (b <= 0)
    zero_crossing = ((k >= 0) & (b >= 0)) | ((k <= 0) & (b <= 0))
    rate = torch.where(~inr_alone & zero_crossing, ratio, lr_min)
    violated = ((1 - c1) * (rate * d_filter + lr_inr * d_inr) > 0) & (d_filter != 0)
    rate = torch.where(violated, -lr_inr * d_inr / d_filter, rate).clamp(lr_min, lr_max)
    finite = loss.isfinite() & d_filter.isfinite() & d_inr.isfinite() & lr_inr.isfinite()
    return torch.where(finite, rate, lr_min)


def balanced_step_size_tensor(
    d_filter: Number, d_inr: Number, lr_inr: Number, lr_min: float = 0.0, lr_max: float = 1e-3
) -> Tensor:
    """:func:`balanced_step_size` on tensors, elementwise, without reading a value on the host."""
    check_bounds(lr_min, lr_max)
    d_filter, d_inr, lr_inr = float64_tensors(d_filter, d_inr, lr_inr)
    uphill = (d_filter >= 0) | (lr_inr * d_inr >= 0)
    rate = torch.where(uphill, lr_min, (lr_inr * d_inr / d_filter).clamp(lr_min, lr_max))
    return torch.where(d_filter.isfinite() & d_inr.isfinite() & lr_inr.isfinite(), rate, lr_min)


def step_size_by_rule(
    rule: str, loss: Number, d_filter: Number, lr_d_inr: Number, lr_min: float, lr_max: float, eps: float, c1: float
) -> Tensor:
    """The filter's rate by ``rule`` (``paper`` or ``balance``) from tensors, elementwise; ``lr_d_inr`` is the
    INR's rate times its directional derivative."""
    if rule == "balance":
        return balanced_step_size_tensor(d_filter, lr_d_inr, 1.0, lr_min=lr_min, lr_max=lr_max)
    return filter_step_size_tensor(loss, d_filter, lr_d_inr, 1.0, lr_min=lr_min, lr_max=lr_max, eps=eps, c1=c1)
