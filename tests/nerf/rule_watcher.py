"""An independent check of the line search inside nerfstudio's trainer: step pre-hooks, registered after the line
search's, that recompute the rule's inputs from the raw gradients and Adam's state."""

from __future__ import annotations

import numpy as np
import torch

from rff_field.core.optim import FILTER_GROUP
from rff_field.core.step_rule import filter_step_size


def _adam_direction(opt: torch.optim.Optimizer, group: dict, p: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Adam's update per unit rate with this step's gradient ``g`` folded into the moments (written
    independently)."""
    beta1, beta2 = group["betas"]
    state = opt.state.get(p, {})
    t = float(state["step"]) + 1 if "step" in state else 1.0
    m = (beta1 * state["exp_avg"].double() if "exp_avg" in state else 0) + (1 - beta1) * g
    v = (beta2 * state["exp_avg_sq"].double() if "exp_avg_sq" in state else 0) + (1 - beta2) * g * g
    return -(m / (1 - beta1**t)) / ((v / (1 - beta2**t)).sqrt() + group["eps"])


class RuleWatcher:
    """Step pre-hooks, registered after the line search's, that recompute the rule from the raw gradients."""

    def _grad(self, opt, p) -> torch.Tensor:
        """The gradient in float64, unscaled when the trainer's GradScaler scaled it."""
        scaler = self.trainer.grad_scaler
        if scaler.is_enabled() and not self._unscaled(scaler, opt):
            return p.grad.double() / scaler.get_scale()
        return p.grad.double()

    @staticmethod
    def _unscaled(scaler, opt) -> bool:
        from torch.amp.grad_scaler import OptState

        return scaler._per_optimizer_states[id(opt)]["stage"] is OptState.UNSCALED

    def __init__(self, trainer) -> None:
        self.trainer = trainer
        self.model = trainer.pipeline.model
        self.optimizers = trainer.optimizers.optimizers
        self.observed: list[float] = []
        self.inputs: list[tuple[float, float, float]] = []  # (loss, d_filter, lr * d_inr), recomputed here
        self.recorded: list[tuple[float, float, float]] = []  # the same, as the line search computed them
        self.from_recorded: list[float] = []  # the rule's value on the recorded inputs
        self._step = None
        for opt in self.optimizers.values():
            opt.register_step_pre_hook(self._hook)

    def _directional(self, name: str) -> float:
        opt = self.optimizers[name]
        total = 0.0
        for group in opt.param_groups:
            d = sum(
                float((self._grad(opt, p) * _adam_direction(opt, group, p, self._grad(opt, p))).sum())
                for p in group["params"]
                if p.grad is not None
            )
            total += d * (group["lr"] if name != FILTER_GROUP else 1.0)
        return total

    def _hook(self, opt, args, kwargs) -> None:
        if self._step != self.trainer.step:  # first optimizer of this step: nothing has been updated yet
            self._step = self.trainer.step
            cfg = self.model.config
            inputs = (
                float(self.model.training_loss().detach()),
                self._directional(FILTER_GROUP),
                sum(self._directional(name) for name in self.optimizers if name != FILTER_GROUP),
            )
            self.inputs.append(inputs)
            last = self.model.line_search.last  # set by the line search's hook, which ran before this one
            recorded = (float(last["loss"]), float(last["d_filter"]), float(last["lr_d_inr"]))
            self.recorded.append(recorded)
            bounds = dict(lr_min=cfg.line_search.lr_min, lr_max=cfg.line_search.lr_max, eps=cfg.line_search.eps,
                          c1=cfg.line_search.c1)  # fmt: skip
            self.from_recorded.append(filter_step_size(*recorded, 1.0, **bounds))
        if opt is self.optimizers[FILTER_GROUP]:
            self.observed.append(float(opt.param_groups[0]["lr"]))

    def assert_rule_applied(self) -> None:
        """Every rate set is the rule's value on the inputs the line search computed (the same float64 arithmetic),
        and those inputs are the ones recomputed here from the raw gradients, to float32 rounding of each sum. The
        rule's values are not compared across the two: ``|b / k|`` with ``k`` near 0 amplifies that rounding."""
        np.testing.assert_allclose(self.observed, self.from_recorded, rtol=1e-12, atol=0)
        recorded, recomputed = np.asarray(self.recorded), np.asarray(self.inputs)
        scale = np.abs(recomputed).max(axis=0)
        assert (np.abs(recorded - recomputed) <= 1e-4 * np.abs(recomputed) + 1e-5 * scale).all()
