"""Optimizer groups by name and the line search attached to them: the one place every application wires the filter.

The filter's parameters form the group named :data:`FILTER_GROUP`, everything else the INR's group. Every step,
after backward and before the optimizer steps, the line search sets the filter group's rate (when enabled);
otherwise the filter keeps the rate its application gives it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal, Optional, Sequence, Union

import torch
from torch import Tensor, nn
from torch.optim import Optimizer

from rff_field.core.errors import UsageError
from rff_field.core.filter import split_filter_parameters
from rff_field.core.line_search import FilterLineSearch

FILTER_GROUP = "filter"
"""Name of the optimizer group holding the filter's parameters."""
INR_GROUP = "inr"
"""Name of the optimizer group holding every other trainable parameter."""


@dataclass
class LineSearchConfig:
    """How the filter's learning rate is set every step: the paper's line search (Algorithm 1 + Armijo check)."""

    enabled: bool = True
    """Set the filter's rate every step by the line search; off: the filter keeps the rate its application
    gives it (a constant, or the INR's schedule)."""
    rule: Literal["paper", "balance"] = "paper"
    """``paper``: the paper's rule (docs/method.md); ``balance``: a named deviation, the rate at which the
    filter's predicted decrease equals the INR's."""
    direction: Literal["adam", "gradient"] = "adam"
    """Update direction whose directional derivative the rule uses: Adam's step, or the negative gradient."""
    lr_min: float = 0.0
    """Lower bound of the filter's rate."""
    lr_max: float = 1e-3
    """Upper bound of the filter's rate (the paper's alpha_max)."""
    eps: float = 1e-6
    """The rule's epsilon, added to the slope of its linear loss model."""
    c1: float = 1e-3
    """Armijo sufficient-decrease constant (the paper's; under the rule's linear loss model no value in [0, 1)
    changes a rate)."""
    fused: bool = False
    """Compile the line search's arithmetic (torch.compile) into a few fused kernels: fewer kernel launches
    per step on a GPU, the same rates to rounding; the first steps wait for the compiler (seconds)."""

    def check(self, prefix: str = "--line-search.") -> None:
        """Raise :class:`UsageError` for values the rule cannot use.

        Args:
            prefix: How the command line spells this config's options, for the message.
        """
        for name in ("lr_min", "lr_max", "eps", "c1"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                option = prefix + name.replace("_", "-")
                raise UsageError(f"{option} must be a finite number >= 0, got {value}")
        if self.lr_min > self.lr_max:
            raise UsageError(f"{prefix}lr-min ({self.lr_min:g}) must not exceed {prefix}lr-max ({self.lr_max:g})")
        if self.c1 >= 1:
            raise UsageError(f"{prefix}c1 must lie in [0, 1), got {self.c1}")
        if self.rule not in ("paper", "balance"):
            raise UsageError(f"{prefix}rule must be paper or balance, got {self.rule!r}")
        if self.direction not in ("adam", "gradient"):
            raise UsageError(f"{prefix}direction must be adam or gradient, got {self.direction!r}")


def named_param_groups(model: nn.Module, inr_lr: float, filter_lr: float, inr_group: str = INR_GROUP) -> list[dict]:
    """Optimizer groups ``[{name: inr_group, ...}, {name: "filter", ...}]``; no filter group without a filter.

    Args:
        model: The network; its filters are found by type (:class:`~rff_field.core.filter.BiasFreeFilter`).
        inr_lr: Learning rate of the INR's group.
        filter_lr: Initial learning rate of the filter's group.
        inr_group: Name of the INR's group.
    """
    filter_params, inr_params = split_filter_parameters(model)
    groups = [{"name": inr_group, "params": inr_params, "lr": inr_lr}]
    if filter_params:
        groups.append({"name": FILTER_GROUP, "params": filter_params, "lr": filter_lr})
    return groups


def param_group(optimizer: Optimizer, name: str) -> Optional[dict]:
    """The optimizer's group called ``name`` (None when it has none)."""
    return next((group for group in optimizer.param_groups if group.get("name") == name), None)


def attach_line_search(
    config: LineSearchConfig,
    optimizers: Union[Optimizer, Sequence[Optimizer]],
    loss_fn: Callable[[], Union[Tensor, float, None]],
    filter_params: Optional[Sequence[nn.Parameter]] = None,
    inr_params: Optional[Sequence[nn.Parameter]] = None,
    grad_scaler: Optional[torch.amp.GradScaler] = None,
) -> Optional[FilterLineSearch]:
    """Hook the line search into ``optimizers`` when ``config.enabled`` and there is a filter; else None.

    Raises ``UsageError`` when ``filter_params`` is not given and no group has a name (an optimizer not built by
    :func:`named_param_groups`), or none is named ``filter`` while one has no name or a name like it (``Filter``),
    where None would silently train without the line search.

    Args:
        config: The rule and its bounds.
        optimizers: The optimizer(s) holding the filter's and the INR's parameters.
        loss_fn: Returns this step's training loss.
        filter_params: The filter's parameters (a group of their own); default: the groups named ``filter``.
        inr_params: The other parameters the step updates; default: every parameter of the other groups.
        grad_scaler: The ``GradScaler`` of mixed-precision training, if any.
    """
    optimizers = [optimizers] if isinstance(optimizers, Optimizer) else list(optimizers)
    groups = [group for optimizer in optimizers for group in optimizer.param_groups]
    if filter_params is None:
        if config.enabled and not any("name" in g for g in groups):
            raise UsageError(
                f"the optimizer's parameter groups have no names: build them with named_param_groups (the filter's "
                f"group is named '{FILTER_GROUP}') or pass filter_params"
            )
        filter_params = [p for g in groups if g.get("name") == FILTER_GROUP for p in g["params"]]
        near = [g.get("name") for g in groups if g.get("name") != FILTER_GROUP
                and ("name" not in g or FILTER_GROUP in str(g["name"]).casefold())]  # fmt: skip
        if config.enabled and not filter_params and near:
            found = [repr(name) if name is not None else "a group without a name" for name in near]
            raise UsageError(
                f"no parameter group is named '{FILTER_GROUP}' (found {', '.join(found)}): name the "
                f"filter's group '{FILTER_GROUP}', e.g. with named_param_groups, or pass filter_params"
            )
    if inr_params is None:
        inr_params = [p for g in groups if g.get("name") != FILTER_GROUP for p in g["params"]]
    if not config.enabled or not filter_params:
        return None
    config.check()
    return FilterLineSearch(
        filter_params,
        inr_params,
        optimizers,
        loss_fn,
        direction=config.direction,
        rule=config.rule,
        lr_min=config.lr_min,
        lr_max=config.lr_max,
        eps=config.eps,
        c1=config.c1,
        grad_scaler=grad_scaler,
        fused=config.fused,
    )
