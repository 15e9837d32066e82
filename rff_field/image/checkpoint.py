"""Save a fit that stops before its last iteration, and resume it there.

A checkpoint holds one model's training at the end of an iteration: its parameters, its Adam state, its mini-batch
generator, its curves so far and the seconds spent. Resumed with the same settings on the same image, the fit goes
on with the same steps it would have taken had it not stopped (on one machine, to the last bit).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Optional

import torch
from torch import Tensor, nn
from torch.optim import Optimizer

from rff_field.common.checkpoint import (
    TrainingCheckpoint,
    adam_state,
    content_digest,
    model_state,
    restore_model,
    settings_key,
)
from rff_field.core.divergence import LastFiniteState

if TYPE_CHECKING:
    from rff_field.image.fit import FitConfig


@dataclass
class FitCheckpoint(TrainingCheckpoint):
    """One model's training at the end of iteration ``iteration`` (``settings``: :func:`fit_settings`).

    Args:
        generator: The state of the mini-batch order's generator.
        mse: The training MSE of each iteration so far.
        records: The line search's record (loss, filter slope, INR slope, rate) of each iteration, if it runs.
        filter_lrs: Without the line search: the filter's rate of each iteration.
        resumed: Iterations at which earlier runs resumed the fit.
    """

    generator: Tensor
    mse: Tensor
    records: Optional[Tensor] = None
    filter_lrs: list[float] = field(default_factory=list)
    resumed: list[int] = field(default_factory=list)


def fit_settings(config: "FitConfig", name: str, pixels: Tensor) -> str:
    """What a checkpoint must have been written with to be resumed: the fit's settings, the image's name, shape and
    content."""
    return settings_key(asdict(config), name, list(pixels.shape), {"image content": content_digest(pixels)})


def model_checkpoint(
    model: nn.Module,
    optimizer: Optimizer,
    generator: torch.Generator,
    iteration: int,
    seconds: float,
    settings: str,
    mse: Tensor,
    records: Optional[Tensor],
    filter_lrs: list[float],
    resumed: list[int],
) -> FitCheckpoint:
    """The checkpoint of ``model`` (one of the models ``optimizer`` trains) after ``iteration`` iterations."""
    return FitCheckpoint(
        iteration=iteration,
        seconds=seconds,
        settings=settings,
        model=model_state(model),
        adam=adam_state(model, optimizer),
        generator=generator.get_state(),
        mse=mse[:iteration].detach().cpu().clone(),
        records=records[:iteration].detach().cpu().clone() if records is not None else None,
        filter_lrs=list(filter_lrs[:iteration]),
        resumed=list(resumed),
    )


def restore_fit(
    checkpoint: FitCheckpoint,
    model: nn.Module,
    optimizer: Optimizer,
    generator: torch.Generator,
    guard: LastFiniteState,
    index: Optional[int],
    mse: Tensor,
    records: Optional[Tensor],
    filter_lrs: list[float],
) -> None:
    """Put a fit back to the checkpoint's state: ``model``, its Adam state, ``generator``, its divergence ``guard``,
    and its curves: ``mse`` (and ``records``) of shape ``[iters]`` (``[iters, 4]``), or for model ``index`` of a
    batch ``[iters, K]`` (``[iters, K, 4]``), and ``filter_lrs``."""
    restore_model(model, optimizer, checkpoint.model, checkpoint.adam)
    generator.set_state(checkpoint.generator)
    done = checkpoint.iteration
    mse, records = (mse, records) if index is None else (mse[:, index], None if records is None else records[:, index])
    mse[:done] = checkpoint.mse
    if records is not None and checkpoint.records is not None:
        records[:done] = checkpoint.records
    filter_lrs[:done] = checkpoint.filter_lrs
    guard.resume(done, mse[0].clone())
