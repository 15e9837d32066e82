"""What the NeRF models with a filtered embedding share (``rff-nerf``, ``rff-nerfacto``): the filter's optimizer
group, the line search hooked into nerfstudio's trainer, the filter's last rate kept in the checkpoint and shown in
the viewer, the training loss the rule reads, a stop on divergence, LPIPS when its weights load, and subnormal floats
flushed to zero on the CPU.

A model class lists :class:`FilteredModelMixin` before its nerfstudio base class, calls :meth:`setup_filter` in
``populate_modules``, and defines ``has_filter`` and ``config.line_search``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

import torch
from nerfstudio.cameras.cameras import Cameras
from nerfstudio.cameras.rays import RayBundle
from nerfstudio.engine.callbacks import TrainingCallback, TrainingCallbackAttributes, TrainingCallbackLocation
from nerfstudio.utils import writer
from nerfstudio.viewer.viewer_elements import ViewerNumber
from torch import Tensor, nn
from torch.nn import Parameter

from rff_field.core.embedding import EmbeddingConfig, resolve_bands
from rff_field.core.errors import check_fields
from rff_field.core.filter import FilterInit, filter_parameters
from rff_field.core.line_search import FilterLineSearch
from rff_field.core.optim import FILTER_GROUP, LineSearchConfig, attach_line_search
from rff_field.nerf.divergence import divergence_callback
from rff_field.nerf.field import EncodingKind
from rff_field.nerf.lpips import load_lpips
from rff_field.nerf.stopping import ctrl_c_callback

FIELDS_GROUP = "fields"
"""Name of the optimizer group of the fields (the INR); the filter's parameters are moved out of it."""
MODEL_OPTION_PREFIX = "--pipeline.model."
"""How ``ns-train`` spells a model option on the command line."""
FILTER_LR_TAG = "learning_rate/filter"
"""Scalar under which the filter's learning rate is logged."""
FILTER_LR_BUFFER = "filter_lr"
"""Name of the model's buffer holding the filter's rate of the last training step (saved in checkpoints)."""


@dataclass
class FilteredModelConfig:
    """The options of the filtered position embedding that ``rff-nerf`` and ``rff-nerfacto`` share. Each model's
    config lists this class before its nerfstudio base and declares ``num_frequencies``, ``rff_num_frequencies``
    and ``pe_bands`` itself (their defaults differ)."""

    encoding: EncodingKind = "pe"
    """Position embedding: 'pe' (on-axis bands) or 'rff' (random Fourier features)."""
    pe_scale: float = 64.0
    """Highest frequency s (cycles per unit of the position the field sees) of the 'loglinear' bands."""
    rff_sigma: float = 8.0
    """Standard deviation (cycles per unit) of the 'rff' frequencies."""
    rff_seed: int = 0
    """Seed of the 'rff' frequencies (stored in checkpoints)."""
    use_filter: bool = True
    """Filter the position embedding (False gives the unfiltered 'MLP+PE' baseline)."""
    filter_num_layers: int = 3
    """Linear layers of the filter (width = embedding width, ReLU between, none after the last)."""
    filter_bias: bool = False
    """Give the filter biases (ablation only: it is no longer a linear filter)."""
    filter_init: FilterInit = "default"
    """Filter weights at start: PyTorch's default (the paper), or scaled/identity/orthogonal times the gain."""
    filter_init_gain: float = 1.0
    """Gain of the scaled/identity/orthogonal filter initialisations."""
    filter_residual: bool = False
    """Feed (1 + f(gamma)) * gamma instead of the paper's f(gamma) * gamma (a deviation: it starts near gamma)."""
    line_search: LineSearchConfig = field(default_factory=LineSearchConfig)
    """The filter's learning rate, set every step by the paper's line search; with ``enabled`` off the 'filter'
    optimizer's constant rate."""
    compute_lpips: bool = True
    """Compute LPIPS in evaluation when its weights can be loaded (skipped with one notice otherwise)."""
    flush_denormals: bool = True
    """Flush subnormal floats (below 1.2e-38) to zero in the CPU thread that runs the model. The density's
    softplus or exp produces them for empty space, and some CPUs (Intel's) compute with them many times slower.
    False keeps IEEE subnormals (torch's default)."""

    def position_spec(self) -> EmbeddingConfig:
        """The position embedding these options describe."""
        rff = self.encoding == "rff"
        return EmbeddingConfig(
            kind=self.encoding,
            num_frequencies=self.rff_num_frequencies if rff else self.num_frequencies,
            pe_bands=resolve_bands(self.pe_bands, nerf_means="nerf-pytorch"),
            pe_scale=self.pe_scale,
            rff_sigma=self.rff_sigma,
            rff_seed=self.rff_seed,
            include_input=True,
            filtered=self.use_filter,
            **self.filter_options(),
        )

    def filter_options(self) -> dict:
        """The :class:`EmbeddingConfig` arguments of the filter, the same for every filtered embedding of a model."""
        return dict(
            filter_layers=self.filter_num_layers,
            filter_bias=self.filter_bias,
            filter_init=self.filter_init,
            filter_init_gain=self.filter_init_gain,
            filter_residual=self.filter_residual,
        )

    def check_embedding(self) -> None:
        """Raise :class:`UsageError` for embedding, filter or line-search options that cannot work."""
        check_fields(
            self,
            positive_int=("num_frequencies", "rff_num_frequencies", "filter_num_layers"),
            positive=("pe_scale", "rff_sigma", "filter_init_gain"),
            prefix=MODEL_OPTION_PREFIX,
        )
        self.line_search.check(prefix=MODEL_OPTION_PREFIX + "line-search.")


class FilteredModelMixin:
    """The filter's training machinery for a nerfstudio ``Model`` (see the module docstring)."""

    config: object
    line_search: Optional[FilterLineSearch]
    viewer_filter_lr: Optional[ViewerNumber]
    filter_lr: Tensor

    @property
    def has_filter(self) -> bool:
        """Whether the model has a filter (then the ``filter`` optimizer group exists)."""
        raise NotImplementedError

    def setup_filter(self) -> None:
        """Create the state this mixin uses; call it from ``populate_modules``."""
        self.line_search = None
        self._train_loss: Optional[Tensor] = None
        self._lpips: Optional[nn.Module] = None
        self._lpips_tried = False
        self.viewer_filter_lr = None
        # float32: a float64 buffer could not move to MPS devices
        self.register_buffer(FILTER_LR_BUFFER, torch.zeros(()))  # type: ignore[attr-defined]
        self.register_load_state_dict_pre_hook(_accept_checkpoints_without_rate)  # type: ignore[attr-defined]
        self.register_load_state_dict_post_hook(_show_loaded_rate)  # type: ignore[attr-defined]
        if self.has_filter:
            self.viewer_filter_lr = ViewerNumber(
                name="Filter LR", default_value=0.0, disabled=True, hint="The filter's learning rate at the last step"
            )

    def apply_flush_denormals(self) -> None:
        """Set the calling thread's handling of subnormal floats on the CPU as ``flush_denormals`` says."""
        torch.set_flush_denormal(self.config.flush_denormals)  # type: ignore[attr-defined]

    def forward(self, ray_bundle: Union[RayBundle, Cameras]) -> Dict[str, Union[Tensor, List]]:
        """nerfstudio's ``Model.forward`` after :meth:`apply_flush_denormals`: the setting is a thread's own, so it
        is made on whichever thread renders (training, evaluation, the viewer)."""
        self.apply_flush_denormals()
        return super().forward(ray_bundle)  # type: ignore[misc]

    def show_filter_lr(self) -> None:
        """Show the rate of the last training step (also that of a loaded checkpoint) in the viewer."""
        if self.viewer_filter_lr is not None:
            self.viewer_filter_lr.value = float(f"{float(self.filter_lr):.6g}")  # float32 digits, not 1.0000000474e-3

    def split_filter_group(self, groups: Dict[str, List[Parameter]], source: str) -> Dict[str, List[Parameter]]:
        """``groups`` with the filters' parameters moved from the group ``source`` into a ``filter`` group (none when
        there is no filter)."""
        filter_ids = {id(p) for p in filter_parameters(self)}  # type: ignore[arg-type]
        if not filter_ids:
            return groups
        groups = dict(groups)
        groups[FILTER_GROUP] = [p for p in groups[source] if id(p) in filter_ids]
        groups[source] = [p for p in groups[source] if id(p) not in filter_ids]
        return groups

    def record_training_loss(self, loss_dict: Dict[str, Tensor]) -> None:
        """Keep the total of a training step's losses (what the trainer backpropagates) for the line search."""
        if self.training:  # type: ignore[attr-defined]
            self._train_loss = functools.reduce(torch.add, loss_dict.values())  # as nerfstudio's trainer sums them

    def training_loss(self) -> Optional[Tensor]:
        """The total loss of the last training forward pass."""
        return self._train_loss

    def filter_callbacks(self, attributes: TrainingCallbackAttributes) -> List[TrainingCallback]:
        """Stop on divergence, and after the step on Ctrl-C; attach the line search to the trainer's optimizers
        (under its ``GradScaler``) and keep the filter's rate in the buffer saved in checkpoints every step (on the
        device) and log it (scalar, viewer) every ``--logging.steps-per-log`` steps."""
        stop_on_divergence = divergence_callback(self, attributes)  # type: ignore[arg-type]
        stop_on_ctrl_c = ctrl_c_callback(attributes)
        stops = [stop_on_divergence] + ([stop_on_ctrl_c] if stop_on_ctrl_c is not None else [])
        if not self.has_filter:
            return stops
        optimizers = attributes.optimizers
        assert optimizers is not None
        if FILTER_GROUP not in optimizers.optimizers:
            raise RuntimeError(f"the trainer has no optimizer for the '{FILTER_GROUP}' parameter group")
        filter_optimizer = optimizers.optimizers[FILTER_GROUP]
        if optimizers.schedulers.get(FILTER_GROUP) is not None:
            raise RuntimeError(f"the '{FILTER_GROUP}' group must have no scheduler: its rate is set by the model")
        if self.line_search is not None:
            self.line_search.remove()
            self.line_search = None
        groups = self.get_param_groups()  # type: ignore[attr-defined]
        self.line_search = attach_line_search(
            self.config.line_search,  # type: ignore[attr-defined]
            list(optimizers.optimizers.values()),
            self.training_loss,
            filter_params=groups[FILTER_GROUP],
            inr_params=[p for name, ps in groups.items() if name != FILTER_GROUP for p in ps],
            grad_scaler=attributes.grad_scaler,
        )

        def keep_filter_lr(step: int) -> None:
            # a copy on the device, so that the checkpoint holds the rate without a host read every step
            lr = filter_optimizer.param_groups[0]["lr"]
            if isinstance(lr, Tensor):
                self.filter_lr.copy_(lr.detach())
            else:
                self.filter_lr.fill_(lr)

        def log_filter_lr(step: int) -> None:
            # one read from the device per logged step; the line search itself never waits for the host
            last = self.line_search.last if self.line_search is not None else {}
            lr = last["lr"] if last else float(self.filter_lr)
            writer.put_scalar(name=FILTER_LR_TAG, scalar=lr, step=step)
            if last:
                writer.put_scalar(name="filter_line_search/d_filter", scalar=last["d_filter"], step=step)
                writer.put_scalar(name="filter_line_search/lr_d_inr", scalar=last["lr_d_inr"], step=step)
            self.show_filter_lr()

        after_step = [TrainingCallbackLocation.AFTER_TRAIN_ITERATION]
        callbacks = [*stops, TrainingCallback(where_to_run=after_step, func=keep_filter_lr)]
        trainer = attributes.trainer
        every = trainer.config.logging.steps_per_log if trainer is not None else 1
        if every > 0:  # at the steps where nerfstudio logs its own scalars (none when it logs nothing)
            log = TrainingCallback(where_to_run=after_step, func=log_filter_lr, update_every_num_iters=every)
            callbacks.append(log)
        return callbacks

    def lpips_metric(self) -> Optional[nn.Module]:
        """torchmetrics' LPIPS on the model's device, or None when switched off or its weights cannot be loaded."""
        if not getattr(self.config, "compute_lpips", True):
            return None
        if not self._lpips_tried:
            self._lpips_tried = True
            # Kept out of the module tree, so that checkpoints do not depend on whether LPIPS could be loaded.
            object.__setattr__(self, "_lpips", load_lpips())
        if self._lpips is not None:
            self._lpips.to(self.device)  # type: ignore[attr-defined]
        return self._lpips


def _accept_checkpoints_without_rate(module, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
    """Checkpoints written before the rate was kept load too (the viewer then shows 0)."""
    key = prefix + FILTER_LR_BUFFER
    if key not in state_dict:
        state_dict[key] = getattr(module, FILTER_LR_BUFFER).detach().clone()


def _show_loaded_rate(module, incompatible_keys) -> None:
    module.show_filter_lr()
