"""The filter's learning rate, set every step by the paper's line search (docs/method.md): the rule
(:func:`filter_step_size`) and the optimizer pre-hook that feeds it (:class:`FilterLineSearch`)."""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Callable, Iterable, Literal, NamedTuple, Optional, Sequence, Union

import torch
from jaxtyping import Float
from torch import Tensor, nn
from torch.amp.grad_scaler import OptState
from torch.optim import Optimizer

from rff_field.core.errors import UsageError, check_fields
from rff_field.core.filter import FILTER_GROUP

RECORD_FIELDS = ("loss", "d_filter", "lr_d_inr", "lr")
"""Columns of :attr:`FilterLineSearch.records`: the rule's inputs (``lr_d_inr``: rate times slope summed over the
INR's groups) and the rate it set."""
COMPILED_SHAPES_PER_PROCESS = 64  # network shapes the fused line search compiles for (torch's default limit: 8)


@dataclass
class LineSearchConfig:
    """How the filter's learning rate is set every step: the paper's line search."""

    enabled: bool = True
    """Set the filter's rate every step by the line search; off: the filter keeps the rate its application gives."""
    direction: Literal["adam", "gradient"] = "adam"
    """Update direction whose slope the rule uses: Adam's step, or the negative gradient (plain SGD's)."""
    lr_min: float = 0.0
    """Lower bound of the filter's rate."""
    lr_max: float = 1e-3
    """Upper bound of the filter's rate (the paper's alpha_max)."""
    eps: float = 1e-6
    """The rule's epsilon, added to the slope of its linear loss model."""
    fused: bool = False
    """Compile the line search's arithmetic (torch.compile) into a few kernels: fewer launches per step on a GPU,
    the same rates to rounding; the first steps wait for the compiler, and without one it runs unfused."""

    def check(self, prefix: str = "--line-search.") -> None:
        """Raise :class:`UsageError` for values the rule cannot use (options named ``prefix`` + field)."""
        if self.direction not in ("adam", "gradient"):
            raise UsageError(f"{prefix}direction must be one of adam, gradient, got {self.direction!r}")
        check_fields(self, non_negative=("lr_min", "lr_max", "eps"), prefix=prefix)
        if self.lr_min > self.lr_max:
            raise UsageError(f"{prefix}lr-min ({self.lr_min:g}) must not exceed {prefix}lr-max ({self.lr_max:g})")


def filter_step_size(loss: Tensor, d_filter: Tensor, lr_d_inr: Tensor, lr_min: float, lr_max: float, eps: float
                     ) -> Tensor:  # fmt: skip
    """The filter's rate from float64 tensors, elementwise: ``loss``, the slope ``d_filter`` of the loss along the
    filter's update per unit rate, and the INR's rate times its slope. ``lr_min`` for any non-finite input."""
    k = eps - d_filter  # the next loss modelled as b - k * rate
    b = loss + lr_d_inr
    crossing = torch.where(k == 0, lr_max, (b / k).abs().clamp(lr_min, lr_max))
    # the docs' branches in one test: the crossing where b > 0 and k >= 0, or b <= 0 and k < 0 (there |b / k| or
    # lr_min); lr_min where the INR alone reaches zero or the filter's direction is uphill
    rate = torch.where((b > 0) == (k >= 0), crossing, lr_min)
    # sufficient decrease, rate * d_filter + lr_d_inr <= 0, is linear in the rate: if violated, its boundary value
    violated = (rate * d_filter + lr_d_inr > 0) & (d_filter != 0)
    rate = torch.where(violated, -lr_d_inr / d_filter, rate).clamp(lr_min, lr_max)
    return torch.where(loss.isfinite() & d_filter.isfinite() & lr_d_inr.isfinite(), rate, lr_min)


class GroupTensors(NamedTuple):
    """What a parameter group's slope depends on (tensors and numbers only: the compiled function's inputs)."""

    grads: list[Tensor]
    params: list[Tensor]
    adam: Optional[tuple[float, float, float, float, bool]]  # beta1, beta2, eps, weight_decay, decoupled
    moments: Optional[tuple[list[Tensor], list[Tensor], Optional[list[Tensor]]]]  # exp_avg, exp_avg_sq, max_...
    steps: list[Tensor]
    unscale: Optional[Tensor]
    stepped: bool  # the optimizer has taken this step: its moments and steps already include g


def group_slope(group: GroupTensors) -> Tensor:
    """``g . p`` in float64: ``g`` the loss's gradient, ``p`` the update per unit rate (``-g``, or Adam's with its
    moments advanced by ``g`` on copies), in a few passes over the group's tensors."""
    grads = group.grads if group.unscale is None else torch._foreach_mul(group.grads, group.unscale)
    if group.adam is None:
        return -sums(torch._foreach_mul(grads, grads)).sum()
    beta1, beta2, eps, weight_decay, decoupled = group.adam
    exp_avgs, exp_avg_sqs, max_exp_avg_sqs = group.moments
    tiny = torch.finfo(grads[0].dtype).tiny  # the square root of a subnormal is slow on a CPU
    if group.stepped:  # the optimizer's own moments: fewer passes, and its state is left as it is
        m = torch._foreach_mul(exp_avgs, grads)
        v = torch._foreach_maximum(exp_avg_sqs if max_exp_avg_sqs is None else max_exp_avg_sqs, tiny)
        steps = torch.stack(group.steps).double()  # float32 loses 1 - 0.999**t
    else:
        g = torch._foreach_add(grads, group.params, alpha=weight_decay) if weight_decay and not decoupled else grads
        m = torch._foreach_lerp(exp_avgs, g, 1 - beta1)
        torch._foreach_mul_(m, grads)
        v = torch._foreach_mul(exp_avg_sqs, beta2)
        torch._foreach_addcmul_(v, g, g, value=1 - beta2)
        if max_exp_avg_sqs is not None:
            torch._foreach_maximum_(v, max_exp_avg_sqs)
        torch._foreach_maximum_(v, tiny)
        steps = torch.stack(group.steps).double() + 1
    root_c2 = (1 - beta2**steps).sqrt()
    # Adam's p = -(m / c1) / (sqrt(v / c2) + eps) = -(sqrt(c2) / c1) * m / (sqrt(v) + eps * sqrt(c2)), as torch's Adam
    torch._foreach_sqrt_(v)
    torch._foreach_add_(v, (eps * root_c2).to(v[0].dtype).unbind())
    torch._foreach_div_(m, v)
    slopes = -(root_c2 / (1 - beta1**steps)).to(m[0].device) * sums(m)
    if weight_decay and decoupled:
        slopes = slopes - weight_decay * sums(torch._foreach_mul(grads, group.params))
    return slopes.sum()


def sums(tensors: Sequence[Tensor]) -> Float[Tensor, " tensors"]:
    """Each tensor's sum, as float64 (summed in its own dtype: torch's cascade sum, five times faster on a CPU)."""
    return torch.stack([tensor.sum() for tensor in tensors]).double()


def line_search_row(loss: Tensor, filter_groups: Sequence[GroupTensors], inr_groups: Sequence[GroupTensors],
                    inr_lrs: Sequence[Tensor], lr_d_stepped: Tensor, lr_min: float, lr_max: float, eps: float,
                    clip_factor: Optional[Tensor]) -> Float[Tensor, " 4"]:  # fmt: skip
    """One step's :data:`RECORD_FIELDS` (what ``fused`` compiles); ``lr_d_stepped``: rate times slope of the INR's
    groups whose optimizers already stepped. The slopes divide by the factor of a clipping since backward: the
    loss's own gradient along the clipped steps."""
    d_filter = loss.new_zeros(())
    for group in filter_groups:
        d_filter = d_filter + group_slope(group)
    lr_d_inr = rate_times_slope(inr_groups, inr_lrs, lr_d_stepped)
    if clip_factor is not None:
        d_filter, lr_d_inr = d_filter / clip_factor, lr_d_inr / clip_factor
    return torch.stack([loss, d_filter, lr_d_inr, filter_step_size(loss, d_filter, lr_d_inr, lr_min, lr_max, eps)])


def rate_times_slope(groups: Sequence[GroupTensors], lrs: Sequence[Tensor], total: Tensor) -> Tensor:
    """``total`` plus each group's rate times its slope."""
    for group, lr in zip(groups, lrs):
        total = total + lr * group_slope(group)
    return total


def decoupled_weight_decay(optimizer: Optimizer, group: dict) -> bool:
    """Whether ``group``'s weight decay is AdamW's, outside the gradient."""
    return isinstance(optimizer, torch.optim.AdamW) or bool(group.get("decoupled_weight_decay"))


def _at_least_float32(tensor: Tensor) -> Tensor:
    return tensor if tensor.dtype in (torch.float32, torch.float64) else tensor.float()


def group_tensors(optimizer: Optimizer, group: dict, direction: str, unscale: Optional[Tensor],
                  only: Optional[set[int]] = None, stepped: bool = False) -> Optional[GroupTensors]:  # fmt: skip
    """The tensors of ``group``'s parameters that have a gradient (and are in ``only``); None when there are none.
    ``stepped``: read after ``optimizer`` took the step (see :attr:`GroupTensors.stepped`)."""
    params = [p for p in group["params"] if p.grad is not None and (only is None or id(p) in only)]
    if not params:
        return None
    grads = [_at_least_float32(p.grad) for p in params]
    if direction == "gradient":
        return GroupTensors(grads, [], None, None, [], unscale, stepped)
    states = [optimizer.state.get(p, {}) for p in params]
    step_device = params[0].device if group.get("capturable") or group.get("fused") else torch.device("cpu")

    def state(name: str) -> list[Tensor]:
        return [_at_least_float32(s[name]) if name in s else torch.zeros_like(g) for s, g in zip(states, grads)]

    decoupled = decoupled_weight_decay(optimizer, group)
    adam = (*map(float, group["betas"]), float(group["eps"]), float(group["weight_decay"]), decoupled)
    moments = (state("exp_avg"), state("exp_avg_sq"), state("max_exp_avg_sq") if group["amsgrad"] else None)
    steps = [s["step"] if "step" in s else torch.zeros((), device=step_device) for s in states]
    return GroupTensors(grads, [_at_least_float32(p.detach()) for p in params], adam, moments, steps, unscale, stepped)


class FilterLineSearch:
    """Sets the filter groups' rate before the filter's optimizer steps (step hooks on each optimizer, any order)
    from ``loss_fn()`` (averaged under ``torch.distributed``) and the gradients (unscaled by ``grad_scaler``); the
    INR's slopes of an optimizer that steps first are read from its own moments after its step. The rate is a device
    tensor the optimizer reads, so no step after the first reads the host; each step's :data:`RECORD_FIELDS` stay in
    :attr:`records`. ``inr_params``: None for every other parameter."""

    def __init__(
        self,
        filter_params: Iterable[nn.Parameter],
        inr_params: Optional[Iterable[nn.Parameter]],
        optimizers: Union[Optimizer, Sequence[Optimizer]],
        loss_fn: Callable[[], Union[Tensor, float]],
        config: Optional[LineSearchConfig] = None,
        grad_scaler: Optional[torch.amp.GradScaler] = None,
    ) -> None:
        self.config = config = config or LineSearchConfig()
        self.optimizers = list(dict.fromkeys([optimizers] if isinstance(optimizers, Optimizer) else optimizers))
        self.loss_fn, self.grad_scaler = loss_fn, grad_scaler
        self._filter_ids = {id(p) for p in filter_params}
        every = [p for opt in self.optimizers for group in opt.param_groups for p in group["params"]]
        inr_params = every if inr_params is None else inr_params
        self._inr_ids = {id(p) for p in inr_params} - self._filter_ids
        self._params = [p for p in every if id(p) in self._filter_ids | self._inr_ids]
        self._find_groups()
        self._device = self._filter_groups[0][1]["params"][0].device
        self._records = torch.zeros(64, len(RECORD_FIELDS), dtype=torch.float64, device=self._device)
        self._steps, self._step_key, self._stepped, self._rate_set = 0, None, set(), False
        self._lr_d_stepped: list[Tensor] = []  # rate times slope of the INR's optimizers that stepped this step
        self._clip: Optional[tuple[Tensor, list[tuple[weakref.ref, int]]]] = None
        self._compiled_row = torch.compile(line_search_row, fullgraph=True, dynamic=False) if config.fused else None
        self.compiled = False  # whether the rule's arithmetic ran compiled (fused, and the compiler worked)
        self._handles = [opt.register_step_pre_hook(self._pre_step) for opt in self.optimizers]
        self._handles += [opt.register_step_post_hook(self._post_step) for opt in self.optimizers]
        self._handles += [opt.register_load_state_dict_post_hook(lambda _: self._find_groups())
                          for opt in self.optimizers]  # fmt: skip

    def _find_groups(self) -> None:
        """Find the filter's and the INR's parameter groups and give the filter's a tensor rate."""
        self._filter_groups, self._inr_groups, found = [], [], set()
        for opt in self.optimizers:
            if self.config.direction == "adam" and not isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)):
                raise UsageError(f"the line search's adam direction needs Adam or AdamW, got {type(opt).__name__}")
            for group in opt.param_groups:
                ids = {id(p) for p in group["params"]}
                if ids & self._filter_ids and ids - self._filter_ids:
                    raise UsageError("the filter's parameters must be in a parameter group of their own")
                if group.get("maximize"):
                    raise UsageError("the line search models a descent step: it takes no maximize=True optimizer")
                if ids & (self._filter_ids | self._inr_ids):
                    (self._filter_groups if ids & self._filter_ids else self._inr_groups).append((opt, group))
                found |= ids
        if not self._filter_ids or not self._filter_ids <= found:
            raise UsageError("the line search needs the filter's parameters, all held by the given optimizers (the "
                             "trained ones, as split_filter_parameters gives them)")  # fmt: skip
        self._rates = [tensor_learning_rate(opt, group) for opt, group in self._filter_groups]
        self._filter_optimizers = {id(opt) for opt, _ in self._filter_groups}

    def remove(self) -> None:
        """Detach the hooks; the filter groups keep their last rate, as a number again."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for (_, group), rate in zip(self._filter_groups, self._rates):
            if group["lr"] is rate:
                group["lr"] = float(rate)

    @property
    def records(self) -> Float[Tensor, "steps 4"]:
        """Every step's :data:`RECORD_FIELDS`, on the device (a view: reading it does not synchronise)."""
        return self._records[: self._steps]

    def record(self, step: int = -1) -> dict[str, float]:
        """One step's :data:`RECORD_FIELDS` on the host (default: the last step's; empty before the first)."""
        return dict(zip(RECORD_FIELDS, self.records[step].tolist())) if self._steps else {}

    def clip_grad_norm_(self, max_norm: float) -> Tensor:
        """``torch.nn.utils.clip_grad_norm_`` of the filter's and the INR's gradients; the coming step's slopes divide
        by the clipping factor (the rule's model needs the loss's own gradient). Returns the norm before clipping."""
        total = torch.nn.utils.clip_grad_norm_(self._params, max_norm)
        factor = (max_norm / (total.double() + 1e-6)).clamp(max=1.0).to(self._device)  # torch's own factor
        self._clip = (factor, [(weakref.ref(p.grad), p.grad._version) for p in self._params if p.grad is not None])
        return total

    def _pre_step(self, optimizer: Optimizer, args: tuple, kwargs: dict) -> None:
        if any(arg is not None for arg in args[1:]) or kwargs.get("closure") is not None:
            raise UsageError("the line search reads the step's loss and gradients: call backward yourself and step "
                             "without a closure")  # fmt: skip
        loss = self.loss_fn()
        # a new step: another loss (a tensor known by its storage and version), or an optimizer steps again
        key = (loss.untyped_storage().data_ptr(), loss.storage_offset(), loss._version) if isinstance(loss, Tensor) \
            else float(loss)  # fmt: skip
        if key != self._step_key or id(optimizer) in self._stepped:
            self._step_key, self._stepped, self._rate_set, self._lr_d_stepped = key, set(), False, []
        if not self._rate_set and id(optimizer) in self._filter_optimizers:
            self._set_rate(loss)
            self._rate_set = True
        elif not self._rate_set and not self._reads_after_step(optimizer):
            self._lr_d_stepped.append(self._lr_d_inr(optimizer, stepped=False))
        self._stepped.add(id(optimizer))

    def _post_step(self, optimizer: Optimizer, args: tuple, kwargs: dict) -> None:
        if not self._rate_set and id(optimizer) not in self._filter_optimizers and self._reads_after_step(optimizer):
            self._lr_d_stepped.append(self._lr_d_inr(optimizer, stepped=True))

    def _reads_after_step(self, optimizer: Optimizer) -> bool:
        """Whether ``optimizer``'s moments after its step give its slopes: not fused (whose kernel may unscale the
        gradients), no decoupled weight decay (whose term reads the parameters before the step)."""
        if self.config.direction == "gradient":
            return True
        return not any(group.get("fused") or decoupled_weight_decay(optimizer, group) and group["weight_decay"]
                       for opt, group in self._inr_groups if opt is optimizer)  # fmt: skip

    def _lr_d_inr(self, optimizer: Optimizer, stepped: bool) -> Tensor:
        """Rate times slope summed over ``optimizer``'s INR groups, read before or after its step."""
        groups, lrs = self._tensors([(opt, g) for opt, g in self._inr_groups if opt is optimizer], self._inr_ids,
                                    stepped)  # fmt: skip
        with torch.no_grad():
            return rate_times_slope(groups, lrs, self._zero())

    def _tensors(self, groups: list[tuple[Optimizer, dict]], only: Optional[set[int]], stepped: bool
                 ) -> tuple[list[GroupTensors], list[Tensor]]:  # fmt: skip
        """:func:`group_tensors` of the ``(optimizer, group)`` pairs that have gradients, and their rates."""
        found = [(group_tensors(opt, g, self.config.direction, self._inverse_scale(opt), only, stepped), g["lr"])
                 for opt, g in groups]  # fmt: skip
        return [t for t, _ in found if t is not None], [self._as_rate(lr) for t, lr in found if t is not None]

    def _zero(self) -> Tensor:
        return torch.zeros((), dtype=torch.float64, device=self._device)

    def _as_rate(self, lr: Union[Tensor, float]) -> Tensor:
        if isinstance(lr, Tensor):
            return lr.to(self._device, torch.float64)
        return torch.full((), lr, dtype=torch.float64, device=self._device)

    def _inverse_scale(self, optimizer: Optimizer) -> Optional[Tensor]:
        """The factor that unscales ``optimizer``'s gradients, a tensor on the device (None: not scaled)."""
        scale = getattr(optimizer, "grad_scale", None)  # GradScaler.step gives a fused optimizer its scale
        scaler = self.grad_scaler
        if scale is None and scaler is not None and scaler.is_enabled():
            unscaled = scaler._per_optimizer_states[id(optimizer)]["stage"] is OptState.UNSCALED
            scale = None if unscaled else scaler._get_scale_async()  # a tensor; get_scale() reads it on the host
        return None if scale is None else scale.double().reciprocal().float()

    def _set_rate(self, loss: Union[Tensor, float]) -> None:
        loss = torch.as_tensor(loss).detach().to(self._device, torch.float64)
        if loss.numel() != 1:
            raise UsageError(f"the line search's loss_fn must return the step's scalar loss, got {tuple(loss.shape)}")
        loss = loss.reshape(())
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            loss = loss.to("cuda" if torch.distributed.get_backend() == "nccl" else "cpu", copy=True)
            torch.distributed.all_reduce(loss)
            loss = loss.to(self._device) / torch.distributed.get_world_size()
        if self._steps == 0 and float(loss) < 0:  # the one host read: the rule models where the loss reaches zero
            raise UsageError(f"the line search needs a loss >= 0 (it models where the loss reaches zero), got "
                             f"{float(loss):g}: do not subtract a constant from the loss")  # fmt: skip
        config, clip, self._clip = self.config, self._clip, None
        if clip is not None and not all(ref() is not None and ref()._version == v for ref, v in clip[1]):
            clip = None  # the gradients are no longer those it clipped
        filter_groups, _ = self._tensors(self._filter_groups, None, stepped=False)
        inr_groups, inr_lrs = self._tensors([(opt, g) for opt, g in self._inr_groups if id(opt) not in self._stepped],
                                            self._inr_ids, stepped=False)  # fmt: skip
        args = (loss, filter_groups, inr_groups, inr_lrs, sum(self._lr_d_stepped, self._zero()), config.lr_min,
                config.lr_max, config.eps, None if clip is None else clip[0])  # fmt: skip
        with torch.no_grad():
            row = self._compiled_row_or_fallback(*args) if self._compiled_row is not None else line_search_row(*args)
        for rate in self._rates:
            rate.copy_(row[3])
        for (_, group), rate in zip(self._filter_groups, self._rates):
            group["lr"] = rate  # again: a scheduler may have written a number
        if self._steps == len(self._records):
            self._records = torch.cat([self._records, torch.zeros_like(self._records)])
        self._records[self._steps] = row
        self._steps += 1

    def _compiled_row_or_fallback(self, *args) -> Tensor:
        if self.compiled:
            return self._compiled_row(*args)
        try:
            with torch._dynamo.config.patch(recompile_limit=COMPILED_SHAPES_PER_PROCESS):
                row = self._compiled_row(*args)
        except Exception as error:  # no C++ compiler, no Triton, a torch that cannot trace it: run unfused
            reason = (str(error).strip().splitlines() or [""])[0]
            logging.getLogger(__name__).warning(f"the fused line search could not be compiled ({type(error).__name__}"
                                                f": {reason}); it runs unfused")  # fmt: skip
            self._compiled_row = None
            return line_search_row(*args)
        self.compiled = True
        return row


def tensor_learning_rate(optimizer: Optimizer, group: dict) -> Tensor:
    """Give ``group`` a tensor rate on its parameters' device (set in place, read without a host sync) and return it:
    float64 on the CPU (Adam computes as with a float), float32 on a GPU (Adam ``capturable``)."""
    device, fused = group["params"][0].device, bool(group.get("fused"))
    dtype = torch.float64 if device.type == "cpu" and not fused else torch.float32
    rate = torch.as_tensor(group["lr"], dtype=dtype).detach().clone().to(device)
    if isinstance(optimizer, torch.optim.Adam) and not fused:
        if device.type == "cpu":
            group["foreach"] = False  # foreach Adam refuses a tensor rate unless capturable, which needs a GPU
        elif not group.get("capturable"):
            group["capturable"] = True
            for p in group["params"]:
                if isinstance(optimizer.state.get(p, {}).get("step"), Tensor):
                    optimizer.state[p]["step"] = optimizer.state[p]["step"].to(device=device, dtype=torch.float32)
    group["lr"] = rate
    return rate


def attach_line_search(
    config: LineSearchConfig,
    optimizers: Union[Optimizer, Sequence[Optimizer]],
    loss_fn: Callable[[], Union[Tensor, float]],
    filter_params: Optional[Sequence[nn.Parameter]] = None,
    inr_params: Optional[Sequence[nn.Parameter]] = None,
    grad_scaler: Optional[torch.amp.GradScaler] = None,
) -> Optional[FilterLineSearch]:
    """A :class:`FilterLineSearch` when ``config.enabled`` and there is a filter (default: the parameters of the
    groups named ``filter``), else None."""
    optimizers = [optimizers] if isinstance(optimizers, Optimizer) else list(optimizers)
    groups = [group for optimizer in optimizers for group in optimizer.param_groups]
    if filter_params is None:
        if config.enabled and not any("name" in group for group in groups):
            raise UsageError(f"the line search finds the filter's group by its name, '{FILTER_GROUP}', and these "
                             "groups have none: build them with named_param_groups or pass filter_params")  # fmt: skip
        filter_params = [p for group in groups if group.get("name") == FILTER_GROUP for p in group["params"]]
    if not config.enabled or not filter_params:
        return None
    return FilterLineSearch(filter_params, inr_params, optimizers, loss_fn, config, grad_scaler)
