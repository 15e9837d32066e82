"""nerfstudio's exponential decay with rates as Python floats: nerfstudio's own puts numpy scalars in checkpoints,
which torch's default ``weights_only`` loading (in ``ns-eval``, ``ns-viewer``) refuses."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Type

from nerfstudio.engine.schedulers import ExponentialDecaySchedulerConfig, Scheduler
from torch.optim import Optimizer, lr_scheduler


@dataclass
class FloatExponentialDecaySchedulerConfig(ExponentialDecaySchedulerConfig):
    """Exponential decay from the optimizer's rate to ``lr_final`` in ``max_steps`` (optional warmup)."""

    _target: Type = field(default_factory=lambda: FloatExponentialDecayScheduler)
    """target class to instantiate"""


class FloatExponentialDecayScheduler(Scheduler):
    """nerfstudio's ``ExponentialDecayScheduler`` computing its multiplier as a Python float."""

    config: FloatExponentialDecaySchedulerConfig

    def get_scheduler(self, optimizer: Optimizer, lr_init: float) -> lr_scheduler.LRScheduler:
        cfg = self.config
        lr_final = lr_init if cfg.lr_final is None else cfg.lr_final

        def multiplier(step: int) -> float:
            if step < cfg.warmup_steps:
                progress = min(max(step / cfg.warmup_steps, 0.0), 1.0)
                ramp = math.sin(0.5 * math.pi * progress) if cfg.ramp == "cosine" else progress
                lr = cfg.lr_pre_warmup + (lr_init - cfg.lr_pre_warmup) * ramp
            else:
                t = min(max((step - cfg.warmup_steps) / (cfg.max_steps - cfg.warmup_steps), 0.0), 1.0)
                lr = math.exp(math.log(lr_init) * (1 - t) + math.log(lr_final) * t)
            return float(lr / lr_init)

        return lr_scheduler.LambdaLR(optimizer, lr_lambda=multiplier)
