"""The filter's learning rate, set every step by the paper's line search (Algorithm 1 + Armijo check).

The rule itself is in :mod:`rff_field.core.step_rule`. Here ``group_slopes`` computes its inputs, the directional
derivatives of the loss along each group's optimizer step, from the gradients and the optimizer's state, and
``FilterLineSearch`` sets the filter group's learning rate from an optimizer step pre-hook, i.e. after backward
and before any optimizer of the step has changed a parameter or its state.
"""

from __future__ import annotations

import logging
import warnings
import weakref
from typing import Any, Callable, Iterable, Literal, NamedTuple, Optional, Sequence, Union

import torch
from jaxtyping import Float
from torch import Tensor, nn
from torch.optim import Optimizer

from rff_field.core.errors import UsageError
from rff_field.core.step_rule import Number, Rule, check_bounds, float64_tensors, step_size_by_rule

Direction = Literal["adam", "gradient"]


def _at_least_float32(tensor: Tensor) -> Tensor:
    return tensor if tensor.dtype in (torch.float32, torch.float64) else tensor.float()


class AdamSettings(NamedTuple):
    """The settings of a parameter group that Adam's update direction depends on."""

    betas: tuple[float, float]
    eps: float
    weight_decay: float
    decoupled: bool
    maximize: bool
    amsgrad: bool


class SlopeBatch(NamedTuple):
    """Parameters whose slopes one set of ``torch._foreach_*`` calls computes: same settings, same step, same
    gradient scale. Only tensors, numbers and the group's slot in the caller's list: what a compiled function
    takes as input."""

    slots: tuple[int, ...]
    grads: list[Tensor]
    params: list[Tensor]
    exp_avgs: Optional[list[Tensor]]
    exp_avg_sqs: Optional[list[Tensor]]
    max_exp_avg_sqs: Optional[list[Tensor]]
    step: Union[float, list[Tensor]]
    """The step after this one's update: a number shared by every parameter, or a list of their step tensors
    (capturable or fused Adam keeps them on the device, where reading them would synchronise)."""
    settings: Optional[AdamSettings]
    """None: the direction is ``-grad``."""
    unscale: Optional[Tensor]


def _adam_products(batch: SlopeBatch) -> list[Tensor]:
    """``g * d`` for every parameter of ``batch``, with ``d`` Adam's (or AdamW's) update per unit learning rate.

    The moments are advanced by ``g`` on copies (the optimizer's state is not touched), with the operations of
    ``torch.optim.Adam``'s reference formula, one ``torch._foreach_*`` call per operation for all the parameters.
    """
    settings, grads, params = batch.settings, batch.grads, batch.params
    beta1, beta2 = settings.betas
    g = torch._foreach_neg(grads) if settings.maximize else grads
    if settings.weight_decay and not settings.decoupled:
        g = torch._foreach_add(g, torch._foreach_mul(params, settings.weight_decay))
    if batch.exp_avgs is not None:
        m = torch._foreach_mul(batch.exp_avgs, beta1)
        torch._foreach_add_(m, torch._foreach_mul(g, 1 - beta1))
        v = torch._foreach_mul(batch.exp_avg_sqs, beta2)
        torch._foreach_add_(v, torch._foreach_mul(torch._foreach_mul(g, 1 - beta2), g))
        if batch.max_exp_avg_sqs is not None:
            torch._foreach_maximum_(v, batch.max_exp_avg_sqs)
    else:
        m = torch._foreach_mul(g, 1 - beta1)
        v = torch._foreach_mul(torch._foreach_mul(g, 1 - beta2), g)
    if isinstance(batch.step, float):
        torch._foreach_div_(m, 1 - beta1**batch.step)
        torch._foreach_div_(v, 1 - beta2**batch.step)
    else:
        steps = [t.to(torch.float64) + 1 for t in batch.step]  # in float32, 1 - 0.999**t loses digits at small t
        for beta, moments in ((beta1, m), (beta2, v)):
            correction = torch._foreach_pow(beta, steps)
            torch._foreach_neg_(correction)
            torch._foreach_add_(correction, 1)
            torch._foreach_div_(moments, correction)
    torch._foreach_sqrt_(v)
    torch._foreach_add_(v, settings.eps)
    direction = torch._foreach_div(m, v)
    torch._foreach_neg_(direction)
    if settings.weight_decay and settings.decoupled:
        direction = torch._foreach_sub(direction, torch._foreach_mul(params, settings.weight_decay))
    if settings.maximize:
        torch._foreach_neg_(direction)
    return torch._foreach_mul(grads, direction)


def cpu_step_count(step: Union[Tensor, float]) -> float:
    """Adam's step count, which it keeps on the CPU unless ``capturable`` or ``fused``: reading it costs no
    synchronisation with a GPU (Adam reads it itself every step)."""
    return float(step)


def slope_batches(
    groups: Sequence[tuple[Optimizer, dict]],
    direction: Direction = "adam",
    inverse_scale: Callable[[Optimizer], Optional[Tensor]] = lambda optimizer: None,
    only: Optional[set[int]] = None,
    step_tensors: bool = False,
) -> list[SlopeBatch]:
    """The parameters of ``groups`` that have a gradient, batched by optimizer settings, step and gradient scale.

    Args:
        groups: (optimizer, parameter group) pairs.
        direction: ``adam`` or ``gradient`` (see :func:`group_slopes`).
        inverse_scale: The factor that unscales an optimizer's gradients, None when they are not scaled.
        only: Ids of the parameters to include (default: every parameter with a gradient).
        step_tensors: Give Adam's step counts as the state's tensors even where they are on the CPU, so that the
            batches do not change from step to step (a compiled function then compiles once).
    """
    batches: dict[tuple, tuple[Optional[AdamSettings], Optional[Tensor], list]] = {}
    for slot, (optimizer, group) in enumerate(groups):
        settings = None
        if direction == "adam":
            decoupled = isinstance(optimizer, torch.optim.AdamW) or bool(group.get("decoupled_weight_decay"))
            settings = AdamSettings(
                tuple(float(beta) for beta in group["betas"]),
                float(group["eps"]),
                float(group.get("weight_decay", 0.0)),
                decoupled,
                bool(group.get("maximize", False)),
                bool(group.get("amsgrad", False)),
            )
        unscale = inverse_scale(optimizer)
        on_device = step_tensors or bool(group.get("capturable") or group.get("fused"))
        for p in group["params"]:
            if p.grad is None or (only is not None and id(p) not in only):
                continue
            state = optimizer.state.get(p, {}) if direction == "adam" else {}
            step = state.get("step")
            if step is None:
                step_key: object = 1.0
            elif on_device and isinstance(step, Tensor):
                step_key = "tensor"
            else:
                step_key = cpu_step_count(step) + 1
            moments = ("exp_avg" in state, settings is not None and settings.amsgrad and "max_exp_avg_sq" in state)
            key = (settings, step_key, moments, id(unscale))
            batches.setdefault(key, (settings, unscale, []))[2].append((slot, p, state))
    result = []
    for (_, step_key, (has_moments, has_max), _), (settings, unscale, entries) in batches.items():
        states = [state for _, _, state in entries]
        result.append(
            SlopeBatch(
                slots=tuple(slot for slot, _, _ in entries),
                grads=[_at_least_float32(p.grad) for _, p, _ in entries],
                params=[_at_least_float32(p.detach()) for _, p, _ in entries],
                exp_avgs=_state_list(states, "exp_avg") if has_moments else None,
                exp_avg_sqs=_state_list(states, "exp_avg_sq") if has_moments else None,
                max_exp_avg_sqs=_state_list(states, "max_exp_avg_sq") if has_max else None,
                step=[state["step"] for state in states] if step_key == "tensor" else step_key,
                settings=settings,
                unscale=unscale,
            )
        )
    return result


def _state_list(states: list[dict], name: str) -> list[Tensor]:
    return [_at_least_float32(state[name]) for state in states]


def batch_slopes(batches: Sequence[SlopeBatch], num_groups: int, device: torch.device) -> Float[Tensor, " G"]:
    """``g . p`` for each of ``num_groups`` groups from their :func:`slope_batches`, float64 on ``device``; tensor
    arithmetic only, one float64 sum per parameter."""
    per_group: list[list[Tensor]] = [[] for _ in range(num_groups)]
    for batch in batches:
        grads = batch.grads if batch.unscale is None else torch._foreach_mul(batch.grads, batch.unscale)
        if batch.settings is None:
            products = torch._foreach_neg(torch._foreach_mul(grads, grads))
        else:
            products = _adam_products(batch._replace(grads=grads))
        for slot, product in zip(batch.slots, products):
            per_group[slot].append(product.sum(dtype=torch.float64))
    if num_groups == 0:  # an INR whose parameters are all frozen
        return torch.zeros(0, dtype=torch.float64, device=device)
    zero = torch.zeros((), dtype=torch.float64, device=device)
    return torch.stack([torch.stack(sums).sum() if sums else zero for sums in per_group])


@torch.no_grad()
def group_slopes(
    groups: Sequence[tuple[Optimizer, dict]],
    direction: Direction = "adam",
    inverse_scale: Callable[[Optimizer], Optional[Tensor]] = lambda optimizer: None,
    only: Optional[set[int]] = None,
    device: Optional[torch.device] = None,
) -> Float[Tensor, " G"]:
    """``g . p`` for every parameter group: the directional derivative of the loss along the group's update per
    unit learning rate, as float64 on the parameters' device, read by no host.

    No copy of the parameters is made: the work is done by ``torch._foreach_*`` calls over the parameters of all
    groups that share their optimizer settings and step, and one float64 sum per parameter.

    Args:
        groups: (optimizer, parameter group) pairs.
        direction: ``adam``: the optimizer's Adam update with this step's gradient in its moments; ``gradient``:
            ``-grad``.
        inverse_scale: The factor that unscales an optimizer's gradients (``GradScaler``), None when they are not
            scaled.
        only: Ids of the parameters to include (default: every parameter with a gradient).
        device: Where the result goes when no parameter has a gradient.
    """
    batches = slope_batches(groups, direction, inverse_scale, only)
    device = batches[0].grads[0].device if batches else (device or torch.device("cpu"))
    return batch_slopes(batches, len(groups), device)


def line_search_row(
    loss: Tensor,
    filter_batches: Sequence[SlopeBatch],
    num_filter_groups: int,
    inr_batches: Sequence[SlopeBatch],
    inr_lrs: Sequence[Number],
    rule: str,
    lr_min: float,
    lr_max: float,
    eps: float,
    c1: float,
    clip_factor: Optional[Tensor] = None,
) -> Float[Tensor, " 4"]:
    """One step's :data:`RECORD_FIELDS` from the batched parameters: tensor arithmetic only, the part of the line
    search that ``FilterLineSearch(fused=True)`` compiles.

    Args:
        loss: This step's loss, float64 on the parameters' device.
        filter_batches: :func:`slope_batches` of the filter's groups.
        num_filter_groups: How many groups the filter's parameters fill.
        inr_batches: :func:`slope_batches` of the INR's groups.
        inr_lrs: The learning rate of each INR group.
        rule, lr_min, lr_max, eps, c1: As in :class:`FilterLineSearch`.
        clip_factor: The factor by which the gradients were scaled down since backward (clipping), if any: the
            slopes divide by it, so that they are those of the loss's own gradient along the clipped steps.
    """
    d_filter = batch_slopes(filter_batches, num_filter_groups, loss.device).sum()
    inr_slopes = batch_slopes(inr_batches, len(inr_lrs), loss.device)
    lr_d_inr = torch.zeros((), dtype=torch.float64, device=loss.device)
    for slope, lr in zip(inr_slopes.unbind(), inr_lrs):
        lr_d_inr = lr_d_inr + slope * lr
    if clip_factor is not None:
        d_filter, lr_d_inr = d_filter / clip_factor, lr_d_inr / clip_factor
    rate = step_size_by_rule(rule, loss, d_filter, lr_d_inr, lr_min, lr_max, eps, c1)
    return torch.stack([loss, d_filter, lr_d_inr, rate])


RECORD_FIELDS = ("loss", "d_filter", "lr_d_inr", "lr")
"""What :class:`FilterLineSearch` records every step: the rule's inputs (``lr_d_inr`` = sum over the INR's groups
of rate times slope) and the rate it set."""


COMPILED_SHAPES_PER_PROCESS = 64
"""How many network shapes the fused line search compiles for in one process; later ones run it unfused."""


def no_cuda_runtime_notice(record: logging.LogRecord) -> bool:
    """Drop torch's "No CUDA runtime is found, using CUDA_HOME=..." (logged when the compiler starts on a machine
    with a CUDA toolkit but no GPU): the fused line search compiles for the CPU there, nothing to act on."""
    return "No CUDA runtime is found" not in record.getMessage()


class FilterLineSearch:
    """Sets the learning rate of the filter's parameter group before every optimizer step.

    Hooks every given optimizer (``register_step_pre_hook``). At the first hook of a training step, before any
    optimizer has stepped, it reads the step's loss and the gradients (unscaled when a ``GradScaler`` is in use),
    computes the directional derivatives of the loss along the filter's and the INR's update directions and
    sets the filter group's rate with :func:`~rff_field.core.step_rule.filter_step_size_tensor`
    (``rule="balance"``: :func:`~rff_field.core.step_rule.balanced_step_size_tensor`). The INR's term is
    ``sum_g lr_g * d_g`` over its parameter groups, so several INR groups with their own schedules are handled.
    Where the gradients are clipped, clip them with :meth:`clip_grad_norm_`: the optimizer steps with the clipped
    gradients, the slopes use the loss's own.

    Nothing is read on the host during training: the rule's inputs and the rate stay tensors on the parameters'
    device, the filter group's ``lr`` becomes a tensor that the optimizer reads (its value is updated in place,
    so a scheduler that fills it keeps working), and every step's record is kept on the device until ``history``
    or ``last`` is read. On a GPU, an Adam filter group is switched to ``capturable`` (its step counts move to the
    device), the form in which ``torch.optim.Adam`` takes a tensor rate without a synchronisation.

    Under ``torch.distributed`` the loss is averaged across processes, so every process sets the same rate
    (gradients are already averaged by DDP).

    Args:
        filter_params: The filter's parameters; they must fill their own parameter group(s).
        inr_params: The INR's parameters (the rest of the model that the step updates).
        optimizers: The optimizer(s) holding those parameters; any order of stepping is fine.
        loss_fn: Returns this step's training loss (a tensor or float), read once per step: the loss whose
            gradients the step applies (with gradient accumulation, that of all the micro-batches).
        direction: ``adam``: the optimizer's Adam update with this step's moments; ``gradient``: ``-grad``, plain
            SGD's step (with momentum or weight decay, the step taken is another).
        rule: ``paper``: :func:`~rff_field.core.step_rule.filter_step_size` (docs/method.md); ``balance``:
            :func:`~rff_field.core.step_rule.balanced_step_size`.
        lr_min: Lower bound of the filter's rate.
        lr_max: Upper bound of the filter's rate.
        eps: The rule's epsilon.
        c1: The Armijo constant.
        grad_scaler: The ``GradScaler`` scaling the gradients, if any.
        fused: Compile the line search's arithmetic (:func:`line_search_row`) with ``torch.compile`` into a few
            fused kernels, so that a GPU launches fewer kernels per step. The first steps wait for the
            compiler; where it cannot compile (no C++ compiler or Triton), a warning says so and the line search
            runs unfused. The rates equal the unfused ones to rounding.
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
        fused: bool = False,
    ) -> None:
        if direction not in ("adam", "gradient"):
            raise UsageError(f"direction must be 'adam' or 'gradient', got {direction!r}")
        if rule not in ("paper", "balance"):
            raise UsageError(f"rule must be 'paper' or 'balance', got {rule!r}")
        check_bounds(lr_min, lr_max, eps, c1)
        optimizers = [optimizers] if isinstance(optimizers, Optimizer) else optimizers
        self.optimizers = list(dict.fromkeys(optimizers))  # an optimizer given twice is hooked once
        self.loss_fn = loss_fn
        self.direction: Direction = direction
        self.rule: Rule = rule
        self.lr_min, self.lr_max, self.eps, self.c1 = lr_min, lr_max, eps, c1
        self.grad_scaler = grad_scaler
        self.fused = fused
        if fused:
            logging.getLogger("torch.utils.cpp_extension").addFilter(no_cuda_runtime_notice)  # once: same object
        self._compiled_row: Optional[Callable[..., Tensor]] = (
            torch.compile(line_search_row, fullgraph=True, dynamic=False) if fused else None
        )
        self._compiled_ran = False

        filter_params, inr_params = list(filter_params), list(inr_params)
        if not filter_params:
            raise UsageError("no filter parameters given (an empty or used-up iterable?); pass the filter's parameters")
        for opt in self.optimizers:
            if direction == "adam" and not isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)):
                raise UsageError(f"direction='adam' needs Adam or AdamW optimizers, got {type(opt).__name__}")
            attached = _ATTACHED.get(opt, lambda: None)()
            if attached is not None and attached._handles:
                raise UsageError(f"this {type(opt).__name__} already has a FilterLineSearch; remove() it first")
        self._filter_ids = {id(p) for p in filter_params}
        self._inr_ids = {id(p) for p in inr_params} - self._filter_ids
        trained = [p for opt in self.optimizers for g in opt.param_groups for p in g["params"] if p.requires_grad]
        if not self._inr_ids and any(id(p) not in self._filter_ids for p in trained):
            raise UsageError(
                "no INR parameters given (an empty or used-up iterable?) while the optimizers train others; pass "
                "the INR's parameters (only a wholly frozen INR may be left out)"
            )
        self._params = filter_params + [p for p in inr_params if id(p) in self._inr_ids]
        self._find_groups()
        self._device = self._filter_groups[0][1]["params"][0].device
        self._records = torch.zeros(64, len(RECORD_FIELDS), dtype=torch.float64, device=self._device)
        self._steps = 0
        self._history: list[float] = []
        self._last: dict[str, float] = {}
        self._step_key: object = None
        self._stepped: set[int] = set()
        self._clip: Optional[tuple[Tensor, list[tuple[weakref.ref, int]]]] = None
        self._handles = [opt.register_step_pre_hook(self._pre_step) for opt in self.optimizers]
        self._handles += [opt.register_load_state_dict_post_hook(self._reloaded) for opt in self.optimizers]
        for opt in self.optimizers:
            _ATTACHED[opt] = weakref.ref(self)

    def _find_groups(self) -> None:
        """Find the filter's and the INR's parameter groups and give the filter's a tensor rate."""
        self._filter_groups: list[tuple[Optimizer, dict]] = []
        self._inr_groups: list[tuple[Optimizer, dict]] = []
        found: set[int] = set()
        for opt in self.optimizers:
            for group in opt.param_groups:
                ids = {id(p) for p in group["params"]}
                if ids & self._filter_ids:
                    if ids - self._filter_ids:
                        raise UsageError("the filter's parameters must be in a parameter group of their own")
                    self._filter_groups.append((opt, group))
                elif ids & self._inr_ids:
                    self._inr_groups.append((opt, group))
                found |= ids
        if not self._filter_ids <= found:
            message = "the filter's parameters are not all held by the given optimizers"
            if all(not p.requires_grad for p in self._params if id(p) in self._filter_ids - found):
                message += " (those left out are frozen: pass only the filter's trained parameters, as "
                message += "split_filter_parameters gives them)"
            raise UsageError(message)
        if self._inr_ids and not self._inr_ids & found:  # none at all: a frozen INR, whose step is zero
            raise UsageError("no INR parameter is held by the given optimizers; pass every optimizer that steps the "
                             "model (the rule weighs the filter's step against the INR's)")  # fmt: skip
        self._rates = [tensor_learning_rate(opt, group) for opt, group in self._filter_groups]

    def _reloaded(self, optimizer: Optimizer) -> None:
        # load_state_dict replaces the parameter groups: the rate must be set in the new ones
        self._find_groups()

    def __reduce_ex__(self, protocol: object) -> Any:
        # copied or unpickled optimizers drop their step hooks, and loss_fn would still read the original's loss
        raise TypeError(
            "a FilterLineSearch cannot be copied or pickled (the optimizers' copies lose its hooks and would train "
            "the filter at a frozen rate); save the model's and optimizers' state_dicts and attach a new line "
            "search after loading them"
        )

    def remove(self) -> None:
        """Detach the hooks; the filter group keeps its last rate, as a number again."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        for opt in self.optimizers:
            if _ATTACHED.get(opt, lambda: None)() is self:
                del _ATTACHED[opt]
        for (_, group), rate in zip(self._filter_groups, self._rates):
            if group["lr"] is rate:
                group["lr"] = float(rate)

    @property
    def records(self) -> Float[Tensor, "steps 4"]:
        """Every step's :data:`RECORD_FIELDS`, on the device (reading it does not synchronise)."""
        return self._records[: self._steps]

    @property
    def last_record(self) -> Float[Tensor, " 4"]:
        """The row of :data:`RECORD_FIELDS` that the last step wrote, a view on the device. Under a CUDA graph,
        every replay rewrites the row of the captured step."""
        return self._records[self._steps - 1]

    @property
    def history(self) -> list[float]:
        """The rate set at every step so far (copied from the device when read)."""
        self._copy_to_host()
        return self._history

    @property
    def last(self) -> dict[str, float]:
        """The last step's :data:`RECORD_FIELDS` (empty before the first step; copied from the device when read)."""
        self._copy_to_host()
        return self._last

    @property
    def compiled(self) -> bool:
        """Whether the rule's arithmetic runs compiled (``fused`` and the compiler worked)."""
        return self._compiled_ran

    @property
    def lr(self) -> Optional[float]:
        """The rate set at the last step (None before the first)."""
        history = self.history
        return history[-1] if history else None

    def clip_grad_norm_(self, max_norm: float) -> Tensor:
        """``torch.nn.utils.clip_grad_norm_`` of the filter's and the INR's gradients together, for the coming
        step: the optimizer steps with the clipped gradients, while the rule's first-order model needs the loss's
        own gradient, so that step's slopes are divided by the clipping factor. Returns the norm before clipping."""
        total = torch.nn.utils.clip_grad_norm_(self._params, max_norm)
        # torch's own factor, as it scaled the gradients; it holds while these gradients do (no new backward)
        factor = (max_norm / (total.to(torch.float64) + 1e-6)).clamp(max=1.0).to(self._device)
        self._clip = (factor, [(weakref.ref(p.grad), p.grad._version) for p in self._params if p.grad is not None])
        return total

    def _take_clip_factor(self) -> Optional[Tensor]:
        """The factor of the last :meth:`clip_grad_norm_` if the gradients are still the ones it clipped."""
        if self._clip is None:
            return None
        factor, grads = self._clip
        self._clip = None
        return factor if all(ref() is not None and ref()._version == version for ref, version in grads) else None

    def _copy_to_host(self) -> None:
        if len(self._history) < self._steps:
            rows = self._records[len(self._history) : self._steps].tolist()
            self._history += [row[-1] for row in rows]
            self._last = dict(zip(RECORD_FIELDS, rows[-1]))

    def _pre_step(self, optimizer: Optimizer, args: tuple, kwargs: dict) -> None:
        if any(arg is not None for arg in args[1:]) or kwargs.get("closure") is not None:  # args[0]: the optimizer
            raise UsageError("FilterLineSearch needs the step's loss and gradients before the optimizer steps: call "
                             "backward yourself and step without a closure")  # fmt: skip
        loss = self.loss_fn()
        if loss is None:
            raise RuntimeError("FilterLineSearch: loss_fn returned None; it must return this step's training loss")
        if isinstance(loss, Tensor) and loss.numel() != 1:
            raise UsageError(
                f"FilterLineSearch: loss_fn must return the step's scalar loss, got shape {tuple(loss.shape)}"
            )
        # A new training step starts when the loss changes or an optimizer steps a second time. A tensor loss is
        # known by its storage and version (loss.detach() is the same loss; no reference keeps its graph alive).
        if isinstance(loss, Tensor):
            key: object = (loss.untyped_storage().data_ptr(), loss.storage_offset(), loss._version)
        else:
            key = float(loss)
        if key != self._step_key or id(optimizer) in self._stepped:
            self._step_key = key
            self._stepped = set()
            self._set_rate(loss)
        self._stepped.add(id(optimizer))

    def _inverse_scale(self, optimizer: Optimizer) -> Optional[Tensor]:
        """The factor that unscales ``optimizer``'s gradients, as a tensor on the device (None: not scaled)."""
        # GradScaler.step gives a fused optimizer its scale for the step (the fused kernel unscales): passed or not.
        fused_scale = getattr(optimizer, "grad_scale", None)
        if isinstance(fused_scale, Tensor):
            return fused_scale.double().reciprocal().float()
        scaler = self.grad_scaler
        if scaler is None or not scaler.is_enabled():
            return None
        from torch.amp.grad_scaler import OptState

        if scaler._per_optimizer_states[id(optimizer)]["stage"] is OptState.UNSCALED:
            return None
        scale = scaler._get_scale_async()  # the scale tensor itself; get_scale() would read it on the host
        return None if scale is None else scale.double().reciprocal().float()

    def _set_rate(self, loss: Union[Tensor, float]) -> None:
        loss_value = torch.as_tensor(loss, dtype=torch.float64).detach().reshape(())
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            world = torch.distributed.get_world_size()
            if world > 1:
                reduced = loss_value.to(_collective_device()).clone()
                torch.distributed.all_reduce(reduced)
                loss_value = reduced / world
        loss_value = loss_value.to(self._device)
        batching = dict(direction=self.direction, inverse_scale=self._inverse_scale, step_tensors=self.fused)
        filter_batches = slope_batches(self._filter_groups, **batching)
        inr_batches = slope_batches(self._inr_groups, only=self._inr_ids, **batching)
        inr_lrs = [group["lr"] for _, group in self._inr_groups]
        batches = (filter_batches, len(self._filter_groups), inr_batches)
        settings = (self.rule, self.lr_min, self.lr_max, self.eps, self.c1, self._take_clip_factor())
        # Adam's first step (no moments yet) runs unfused: compiling it would only compile a second graph.
        steady = all(b.settings is None or not isinstance(b.step, float) for b in filter_batches + inr_batches)
        with torch.no_grad():
            if self._compiled_row is not None and steady:
                inr_lrs = float64_tensors(*inr_lrs, device=self._device)  # numbers would be compiled in as constants
                row = self._compiled_row_or_fallback(loss_value, *batches, inr_lrs, *settings)
            else:
                row = line_search_row(loss_value, *batches, inr_lrs, *settings)
        rate = row[3]
        for (_, group), group_rate in zip(self._filter_groups, self._rates):
            group_rate.copy_(rate)
            group["lr"] = group_rate
        if self._steps == len(self._records):
            self._records = torch.cat([self._records, torch.zeros_like(self._records)])
        self._records[self._steps] = row
        self._steps += 1

    def _compiled_row_or_fallback(self, *args) -> Tensor:
        if self._compiled_ran:
            return self._compiled_row(*args)
        try:
            # Every network shape compiles its own graph of the one function; torch's limit of 8 would end a
            # process that fits more shapes (a benchmark) with an error, since the graph must be whole.
            with torch._dynamo.config.patch(recompile_limit=COMPILED_SHAPES_PER_PROCESS):
                row = self._compiled_row(*args)
        except (
            torch._dynamo.exc.TorchDynamoException,
            torch._dynamo.exc.FailOnRecompileLimitHit,
            torch._inductor.exc.InductorError,
            RuntimeError,
        ) as error:
            cause: BaseException = error
            while getattr(cause, "inner_exception", None) is not None:  # torch wraps the compiler's own error
                cause = cause.inner_exception
            lines = str(cause).strip().splitlines()
            reason = f"{type(cause).__name__}: {lines[0]}" if lines else type(cause).__name__
            warnings.warn(f"the fused line search could not be compiled ({reason}); it runs unfused", stacklevel=2)
            self._compiled_row = None
            return line_search_row(*args)
        self._compiled_ran = True
        return row


_ATTACHED: "weakref.WeakKeyDictionary[Optimizer, weakref.ref[FilterLineSearch]]" = weakref.WeakKeyDictionary()
"""The line search hooked into each optimizer: a second one would set the rate twice a step."""


def rate_dtype(device: torch.device, fused: bool = False) -> torch.dtype:
    """The dtype of a tensor learning rate: float64 on the CPU, where Adam then computes exactly what it computes
    with a Python float; float32 where Adam's fused or capturable kernels read it on a GPU, as they expect."""
    return torch.float64 if device.type == "cpu" and not fused else torch.float32


def tensor_learning_rate(optimizer: Optimizer, group: dict) -> Tensor:
    """Give ``group`` a tensor learning rate on its parameters' device, which the optimizer reads without a host
    synchronisation, and return it (set its value in place).

    On a GPU an Adam group becomes ``capturable`` (its step counts move to the device): the form in which Adam
    takes a tensor rate without reading it. On the CPU, Adam's single-tensor path reads it at no cost.
    """
    device = group["params"][0].device
    fused = bool(group.get("fused"))
    rate = torch.as_tensor(group["lr"], dtype=rate_dtype(device, fused)).detach().clone().to(device)
    if isinstance(optimizer, torch.optim.Adam) and not fused:
        if device.type == "cpu":
            group["foreach"] = False  # foreach Adam refuses a tensor rate unless capturable, which needs a GPU
        elif not group.get("capturable"):
            group["capturable"] = True
            for p in group["params"]:
                state = optimizer.state.get(p, {})
                if isinstance(state.get("step"), Tensor):
                    state["step"] = state["step"].to(device=device, dtype=torch.float32)
    group["lr"] = rate
    return rate


def _collective_device() -> torch.device:
    backend = torch.distributed.get_backend()
    if backend == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
