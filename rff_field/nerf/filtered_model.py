"""What ``rff-nerf`` and ``rff-nerfacto`` share: the filter's optimizer group, its line search in nerfstudio's
trainer, its last rate in the checkpoint and the viewer, what the trainer's guards read, LPIPS when its weights load,
subnormals flushed on the CPU."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import torch
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackAttributes, TrainingCallbackLocation
from nerfstudio.utils import writer
from nerfstudio.viewer.viewer_elements import ViewerText
from torch import Tensor, nn
from torch.nn import Parameter

from rff_field.common.lpips import load_lpips
from rff_field.core.filter import FILTER_GROUP, filter_parameters
from rff_field.core.line_search import FilterLineSearch, LineSearchConfig, attach_line_search

FIELDS_GROUP = "fields"
"""The optimizer group of the fields (the INR); the filter's parameters move from it to ``filter``."""
MODEL_OPTION = "--pipeline.model."
"""How ``ns-train`` spells a model option."""
FILTER_LR_TAG = "learning_rate/filter"
"""Scalar under which the filter's learning rate is logged."""


@dataclass
class FilteredModelConfig:
    """Options that ``rff-nerf`` and ``rff-nerfacto`` share (each declares its own ``embedding``)."""

    line_search: LineSearchConfig = field(default_factory=LineSearchConfig)
    """The filter's learning rate, set every step by the paper's line search (off: the 'filter' optimizer's)."""
    compute_lpips: bool = True
    """Compute LPIPS in evaluation when its weights can be loaded (skipped with one notice otherwise)."""
    flush_denormals: bool = True
    """Flush subnormal floats to zero on the CPU thread that renders: the density's activation produces them in
    empty space, and some CPUs compute with them many times slower."""


class FilteredModelMixin:
    """The filter's training machinery for a nerfstudio ``Model`` (see the module docstring)."""

    config: FilteredModelConfig
    has_filter: bool
    filter_lr: Tensor

    def setup_filter(self) -> None:
        """Create the state this mixin uses; call it at the end of ``populate_modules``."""
        self.line_search: Optional[FilterLineSearch] = None
        self._training_loss: Optional[Tensor] = None
        self.max_training_accumulation: Optional[Tensor] = None  # read by the trainer's collapse guard
        self._lpips: Optional[nn.Module] = None
        self.register_buffer("filter_lr", torch.zeros(()))  # the last step's rate, saved in checkpoints
        self.register_load_state_dict_post_hook(lambda module, keys: module.show_filter_lr())
        self.viewer_filter_lr = None
        if self.has_filter:
            # text: viser's number field shows at most 7 decimals, fixed by its first value
            self.viewer_filter_lr = ViewerText(name="Filter LR", default_value="not trained yet", disabled=True,
                                               hint="The filter's learning rate at the last step")  # fmt: skip

    def forward(self, ray_bundle):
        """nerfstudio's ``Model.forward``, with subnormal floats flushed as configured on the calling thread (the
        setting is a thread's own: training, evaluation and the viewer render on different ones)."""
        torch.set_flush_denormal(self.config.flush_denormals)
        return super().forward(ray_bundle)  # type: ignore[misc]

    def show_filter_lr(self) -> None:
        """Show the rate of the last training step (or of a loaded checkpoint) in the viewer."""
        if self.viewer_filter_lr is not None:
            self.viewer_filter_lr.value = f"{float(self.filter_lr):.3g}"

    def split_filter_group(self, groups: Dict[str, List[Parameter]]) -> Dict[str, List[Parameter]]:
        """``groups`` with the filters' parameters moved from ``fields`` into ``filter`` (when there is a filter)."""
        filter_ids = {id(p) for p in filter_parameters(self)}  # type: ignore[arg-type]
        if not filter_ids:
            return groups
        groups = dict(groups)
        groups[FILTER_GROUP] = [p for p in groups[FIELDS_GROUP] if id(p) in filter_ids]
        groups[FIELDS_GROUP] = [p for p in groups[FIELDS_GROUP] if id(p) not in filter_ids]
        return groups

    def record_training(self, loss_dict: Dict[str, Tensor], outputs: Dict[str, Tensor]) -> None:
        """Keep a step's total loss for the line search and its largest accumulated opacity for the trainer."""
        if self.training:  # type: ignore[attr-defined]
            self._training_loss = functools.reduce(torch.add, loss_dict.values())
            self.max_training_accumulation = outputs["accumulation"].detach().max()

    def filter_callbacks(self, attributes: TrainingCallbackAttributes) -> List[TrainingCallback]:
        """Attach the line search to the trainer's optimizers (under its ``GradScaler``); keep the filter's rate in
        the checkpointed buffer every step (on the device) and log it every ``--logging.steps-per-log`` steps."""
        if not self.has_filter:
            return []
        optimizers = attributes.optimizers
        assert optimizers is not None and FILTER_GROUP in optimizers.optimizers
        filter_optimizer = optimizers.optimizers[FILTER_GROUP]
        if self.line_search is not None:
            self.line_search.remove()
        groups = self.get_param_groups()  # type: ignore[attr-defined]
        self.line_search = attach_line_search(
            self.config.line_search,
            list(optimizers.optimizers.values()),
            lambda: self._training_loss,
            filter_params=groups[FILTER_GROUP],
            inr_params=[p for name, ps in groups.items() if name != FILTER_GROUP for p in ps],
            grad_scaler=attributes.grad_scaler,
        )

        def keep_filter_lr(step: int) -> None:
            lr = filter_optimizer.param_groups[0]["lr"]
            self.filter_lr.copy_(lr.detach()) if isinstance(lr, Tensor) else self.filter_lr.fill_(lr)

        def log_filter_lr(step: int) -> None:
            writer.put_scalar(name=FILTER_LR_TAG, scalar=float(self.filter_lr), step=step)
            self.show_filter_lr()

        after_step = [TrainingCallbackLocation.AFTER_TRAIN_ITERATION]
        every = attributes.trainer.config.logging.steps_per_log if attributes.trainer is not None else 1
        return [
            TrainingCallback(where_to_run=after_step, func=keep_filter_lr),
            TrainingCallback(where_to_run=after_step, func=log_filter_lr, update_every_num_iters=max(every, 1)),
        ]

    def lpips_metric(self) -> Optional[nn.Module]:
        """torchmetrics' LPIPS on the model's device, or None when switched off or its weights cannot be loaded."""
        if not self.config.compute_lpips:
            return None
        if self._lpips is None:
            # kept out of the module tree, so that checkpoints do not depend on whether LPIPS could be loaded
            object.__setattr__(self, "_lpips", load_lpips() or False)
        return self._lpips.to(self.device) if self._lpips else None  # type: ignore[attr-defined]
