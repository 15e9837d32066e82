"""The filter's learning rate, set every step by the paper's line search (Algorithm 1 + Armijo check).

``filter_step_size`` is the rule itself, a pure function of a few numbers (see docs/method.md for the reading of
the paper we implement). ``FilterLineSearch`` computes those numbers from the gradients and optimizer state
and sets the filter group's learning rate from an optimizer step pre-hook, i.e. after backward and before
any optimizer of the step has changed a parameter or its state.
"""

from __future__ import annotations

import math
from typing import Callable, Iterable, Literal, Optional, Sequence, Union

import torch
from torch import Tensor, nn
from torch.optim import Optimizer

from rff_field.core.errors import UsageError

Number = Union[float, Tensor]
Direction = Literal["adam", "gradient"]
Rule = Literal["paper", "balance"]


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
        UsageError: The bounds are not finite numbers with ``0 <= lr_min <= lr_max``.
    """
    check_bounds(lr_min, lr_max)
    values = [float(v) for v in (loss, d_filter, d_inr, lr_inr)]
    if not all(math.isfinite(v) for v in values):
        return lr_min
    loss_f, d_a, d_i, lr_i = values

    def clip(rate: float) -> float:
        return min(max(rate, lr_min), lr_max)

    k = -d_a + eps
    b = loss_f + lr_i * d_i
    if k >= 0 and b <= 0:
        rate = lr_min  # the INR's step alone is predicted to reach zero loss
    elif (k >= 0 and b >= 0) or (k <= 0 and b <= 0):
        rate = lr_max if k == 0 else clip(abs(b / k))
    else:
        rate = lr_min  # the filter's direction is predicted to go uphill

    # Sufficient decrease: (1 - c1)(rate * d_a + lr_i * d_i) <= 0, linear in rate.
    if (1 - c1) * (rate * d_a + lr_i * d_i) > 0 and d_a != 0:
        rate = -lr_i * d_i / d_a
    return clip(rate)


def check_bounds(lr_min: float, lr_max: float) -> None:
    """Raise :class:`UsageError` unless ``0 <= lr_min <= lr_max`` are finite numbers."""
    if not (math.isfinite(lr_min) and math.isfinite(lr_max) and 0 <= lr_min <= lr_max):
        raise UsageError(f"the filter's rate bounds need 0 <= lr_min <= lr_max, both finite; got {lr_min}, {lr_max}")


def balanced_step_size(
    d_filter: Number, d_inr: Number, lr_inr: Number, lr_min: float = 0.0, lr_max: float = 1e-3
) -> float:
    """A deviation from the paper, named ``balance``: the rate at which the filter's predicted decrease equals
    the INR's, ``rate * d_filter = lr_inr * d_inr``.

    This is the boundary value of the paper's sufficient-decrease check. Unlike the paper's zero-crossing rule,
    whose ratio ``b / k`` sits orders of magnitude above ``lr_max`` in practice, it follows the INR's learning
    rate schedule and the ratio of the two slopes. Uphill or non-finite inputs give ``lr_min``.
    """
    check_bounds(lr_min, lr_max)
    values = [float(v) for v in (d_filter, d_inr, lr_inr)]
    if not all(math.isfinite(v) for v in values):
        return lr_min
    d_a, d_i, lr_i = values
    if d_a >= 0 or lr_i * d_i >= 0:
        return lr_min
    return min(max(lr_i * d_i / d_a, lr_min), lr_max)


def adam_direction(
    optimizer: Optimizer, group: dict, param: Tensor, grad: Tensor, state: Optional[dict] = None
) -> Tensor:
    """The update Adam/AdamW would apply to ``param`` per unit learning rate, given ``grad``.

    The moments are advanced by ``grad`` on copies; the optimizer's state is not touched. ``state`` overrides
    ``optimizer.state[param]`` (used to process a whole parameter group as one flattened tensor).
    """
    beta1, beta2 = group["betas"]
    if group.get("maximize", False):
        grad = -grad
    decoupled = isinstance(optimizer, torch.optim.AdamW) or group.get("decoupled_weight_decay", False)
    weight_decay = group.get("weight_decay", 0.0)
    g = grad + weight_decay * param if (weight_decay and not decoupled) else grad
    state = optimizer.state.get(param, {}) if state is None else state
    step = float(state["step"]) + 1 if "step" in state else 1.0
    exp_avg = state["exp_avg"] * beta1 + (1 - beta1) * g if "exp_avg" in state else (1 - beta1) * g
    exp_avg_sq = state["exp_avg_sq"] * beta2 + (1 - beta2) * g * g if "exp_avg_sq" in state else (1 - beta2) * g * g
    if group.get("amsgrad", False) and "max_exp_avg_sq" in state:
        exp_avg_sq = torch.maximum(state["max_exp_avg_sq"], exp_avg_sq)
    m_hat = exp_avg / (1 - beta1**step)
    v_hat = exp_avg_sq / (1 - beta2**step)
    direction = -m_hat / (v_hat.sqrt() + group["eps"])
    if weight_decay and decoupled:
        direction = direction - weight_decay * param
    if group.get("maximize", False):
        direction = -direction
    return direction


class FilterLineSearch:
    """Sets the learning rate of the filter's parameter group before every optimizer step.

    Hooks every given optimizer (``register_step_pre_hook``). At the first hook of a training step, before any
    optimizer has stepped, it reads the step's loss and the gradients (unscaled when a ``GradScaler`` is in use),
    computes the directional derivatives of the loss along the filter's and the INR's update directions and
    sets the filter group's rate with :func:`filter_step_size`. The INR's term is ``sum_g lr_g * d_g`` over its
    parameter groups, so several INR groups with their own schedules are handled.

    Under ``torch.distributed`` the loss is averaged across processes, so every process sets the same rate
    (gradients are already averaged by DDP).

    Args:
        filter_params: The filter's parameters; they must fill their own parameter group(s).
        inr_params: The INR's parameters (the rest of the model that the step updates).
        optimizers: The optimizer(s) holding those parameters; any order of stepping is fine.
        loss_fn: Returns this step's training loss (a tensor or float), read once per step.
        direction: ``adam``: the optimizer's Adam update with this step's moments; ``gradient``: ``-grad``.
        rule: ``paper``: :func:`filter_step_size` (docs/method.md); ``balance``: :func:`balanced_step_size`.
        lr_min: Lower bound of the filter's rate.
        lr_max: Upper bound of the filter's rate.
        eps: The rule's epsilon.
        c1: The Armijo constant.
        grad_scaler: The ``GradScaler`` scaling the gradients, if any.
    """

    def __init__(
        self,
        filter_params: Iterable[nn.Parameter],
        inr_params: Iterable[nn.Parameter],
        optimizers: Union[Optimizer, Sequence[Optimizer]],
        loss_fn: Callable[[], Union[Tensor, float, None]],
        direction: Direction = "adam",
        rule: Rule = "paper",
        lr_min: float = 0.0,
        lr_max: float = 1e-3,
        eps: float = 1e-6,
        c1: float = 1e-3,
        grad_scaler: Optional[torch.amp.GradScaler] = None,
    ) -> None:
        if direction not in ("adam", "gradient"):
            raise UsageError(f"direction must be 'adam' or 'gradient', got {direction!r}")
        if rule not in ("paper", "balance"):
            raise UsageError(f"rule must be 'paper' or 'balance', got {rule!r}")
        check_bounds(lr_min, lr_max)
        self.optimizers = [optimizers] if isinstance(optimizers, Optimizer) else list(optimizers)
        self.loss_fn = loss_fn
        self.direction: Direction = direction
        self.rule: Rule = rule
        self.lr_min, self.lr_max, self.eps, self.c1 = lr_min, lr_max, eps, c1
        self.grad_scaler = grad_scaler
        self.history: list[float] = []
        self.last: dict[str, float] = {}

        filter_ids = {id(p) for p in filter_params}
        inr_ids = {id(p) for p in inr_params} - filter_ids
        self._filter_groups: list[tuple[Optimizer, dict]] = []
        self._inr_groups: list[tuple[Optimizer, dict]] = []
        found = set()
        for opt in self.optimizers:
            if direction == "adam" and not isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)):
                raise UsageError(f"direction='adam' needs Adam or AdamW optimizers, got {type(opt).__name__}")
            for group in opt.param_groups:
                ids = {id(p) for p in group["params"]}
                if ids & filter_ids:
                    if ids - filter_ids:
                        raise UsageError("the filter's parameters must be in a parameter group of their own")
                    self._filter_groups.append((opt, group))
                elif ids & inr_ids:
                    self._inr_groups.append((opt, group))
                found |= ids
        if not filter_ids or not filter_ids <= found:
            raise UsageError("the filter's parameters are not all held by the given optimizers")
        self._inr_ids = inr_ids
        self._step_loss: object = None
        self._stepped: set[int] = set()
        self._handles = [opt.register_step_pre_hook(self._pre_step) for opt in self.optimizers]

    def remove(self) -> None:
        """Detach the hooks; the filter group keeps its last rate."""
        for handle in self._handles:
            handle.remove()
        self._handles = []

    @property
    def lr(self) -> Optional[float]:
        """The rate set at the last step (None before the first)."""
        return self.history[-1] if self.history else None

    def _pre_step(self, optimizer: Optimizer, args: tuple, kwargs: dict) -> None:
        loss = self.loss_fn()
        if loss is None:
            raise RuntimeError("FilterLineSearch: loss_fn returned None; it must return this step's training loss")
        # A new training step starts when the loss object changes or an optimizer steps a second time.
        if loss is not self._step_loss or id(optimizer) in self._stepped:
            self._step_loss = loss
            self._stepped = set()
            self._set_rate(loss)
        self._stepped.add(id(optimizer))

    def _grad_unscale(self, optimizer: Optimizer) -> float:
        scaler = self.grad_scaler
        if scaler is None or not scaler.is_enabled():
            return 1.0
        from torch.amp.grad_scaler import OptState

        if scaler._per_optimizer_states[id(optimizer)]["stage"] is OptState.UNSCALED:
            return 1.0
        return 1.0 / float(scaler.get_scale())

    @torch.no_grad()
    def _directional_derivative(self, groups: list[tuple[Optimizer, dict]], only: Optional[set] = None) -> Tensor:
        """``sum_groups lr_g * (g . p)`` for INR groups (``only`` set), ``g . p`` for the filter's, as a float64
        tensor on the parameters' device (no host sync here)."""
        terms = []
        for opt, group in groups:
            params = [p for p in group["params"] if p.grad is not None and (only is None or id(p) in only)]
            if params:
                weight = float(group["lr"]) if only is not None else 1.0
                terms.append(self._group_slope(opt, group, params) * weight)
        return torch.stack(terms).sum() if terms else torch.zeros((), dtype=torch.float64)

    def _group_slope(self, opt: Optimizer, group: dict, params: list[Tensor]) -> Tensor:
        """``g . p`` over ``params`` of one group, computed on flattened copies: a few kernels per group
        instead of a dozen per parameter."""
        unscale = self._grad_unscale(opt)
        grad = torch.cat([p.grad.reshape(-1).float() for p in params]) * unscale
        if self.direction == "gradient":
            return -(grad * grad).sum(dtype=torch.float64)
        states = [opt.state.get(p, {}) for p in params]
        keys = {tuple(sorted(k for k in s if k != "step")) for s in states}
        steps = {float(s["step"]) if "step" in s else 0.0 for s in states}
        if len(keys) == 1 and len(steps) == 1:
            flat_state = {k: torch.cat([s[k].reshape(-1).float() for s in states]) for k in next(iter(keys))}
            if "step" in states[0]:
                flat_state["step"] = states[0]["step"]
            param = torch.cat([p.detach().reshape(-1).float() for p in params])
            return (grad * adam_direction(opt, group, param, grad, flat_state)).sum(dtype=torch.float64)
        total = torch.zeros((), dtype=torch.float64, device=grad.device)  # parameters at different steps
        for p in params:
            g = p.grad.float() * unscale
            direction = adam_direction(opt, group, p.detach().float(), g, opt.state.get(p, {}))
            total = total + (g * direction).sum(dtype=torch.float64)
        return total

    def _set_rate(self, loss: Union[Tensor, float]) -> None:
        loss_value = torch.as_tensor(loss, dtype=torch.float64).detach()
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            world = torch.distributed.get_world_size()
            if world > 1:
                reduced = loss_value.to(_collective_device()).clone()
                torch.distributed.all_reduce(reduced)
                loss_value = reduced / world
        d_filter = self._directional_derivative(self._filter_groups)
        lr_d_inr = self._directional_derivative(self._inr_groups, only=self._inr_ids)
        device = d_filter.device
        # a single device-to-host copy per training step
        loss_f, d_filter_f, lr_d_inr_f = torch.stack([loss_value.to(device), d_filter, lr_d_inr.to(device)]).tolist()
        if self.rule == "balance":
            rate = balanced_step_size(d_filter_f, lr_d_inr_f, 1.0, lr_min=self.lr_min, lr_max=self.lr_max)
        else:
            rate = filter_step_size(
                loss_f, d_filter_f, lr_d_inr_f, 1.0, lr_min=self.lr_min, lr_max=self.lr_max, eps=self.eps, c1=self.c1
            )
        for _, group in self._filter_groups:
            group["lr"] = rate
        self.history.append(rate)
        self.last = {"loss": loss_f, "d_filter": d_filter_f, "lr_d_inr": lr_d_inr_f, "lr": rate}


def _collective_device() -> torch.device:
    backend = torch.distributed.get_backend()
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
