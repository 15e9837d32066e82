"""Save a fit that stops before its last iteration, and resume it there.

A checkpoint holds one model's training at the end of an iteration: its parameters, its Adam state, its mini-batch
generator, its curves so far and the seconds spent. Resumed with the same settings on the same image, the fit goes
on with the same steps it would have taken had it not stopped (on one machine, to the last bit).
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Optional, Sequence

import torch
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from rff_field.core.divergence import LastFiniteState

if TYPE_CHECKING:
    from rff_field.image.fit import FitConfig

CHECKPOINT_FILE = "checkpoint.pt"
"""The checkpoint's name in a job's folder."""
CHECKPOINT_EVERY_S = 300.0
"""Seconds between checkpoints of a running fit (besides the one written when it stops at its time budget)."""


@dataclass
class FitCheckpoint:
    """One model's training at the end of iteration ``iteration``.

    Args:
        iteration: Iterations done.
        seconds: Training seconds spent on them (over every run that resumed it).
        settings: :func:`fit_settings` of the fit that wrote it.
        model: The model's ``state_dict``.
        adam: Adam's state of each parameter, by parameter name.
        generator: The state of the mini-batch order's generator.
        mse: The training MSE of each iteration so far.
        records: The line search's record (loss, filter slope, INR slope, rate) of each iteration, if it runs.
        filter_lrs: Without the line search: the filter's rate after each iteration.
        resumed: Iterations at which earlier runs resumed the fit.
    """

    iteration: int
    seconds: float
    settings: str
    model: dict[str, Tensor]
    adam: dict[str, dict[str, Tensor]]
    generator: Tensor
    mse: Tensor
    records: Optional[Tensor] = None
    filter_lrs: list[float] = field(default_factory=list)
    resumed: list[int] = field(default_factory=list)


def fit_settings(config: "FitConfig", name: str, shape: Sequence[int]) -> str:
    """What a checkpoint must have been written with to be resumed: the fit's settings, the image's name and shape."""
    return json.dumps([asdict(config), name, list(shape)], sort_keys=True, default=str)


def save_checkpoint(path: Path, checkpoint: FitCheckpoint, notify: Callable[[str], None]) -> None:
    """Write ``checkpoint`` to ``path`` atomically (a run killed while writing leaves the previous one); a file that
    cannot be written (a full disk) gets a notice, and the fit goes on."""
    partial = path.with_name(path.name + ".tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(asdict(checkpoint), partial)
        os.replace(partial, path)
    except (OSError, RuntimeError) as error:  # torch.save reports a failed write as a RuntimeError
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        notify(f"could not save the checkpoint {path} ({error}); the fit goes on without it")


def load_checkpoint(
    path: Optional[Path], settings: Optional[str], notify: Callable[[str], None]
) -> Optional[FitCheckpoint]:
    """The checkpoint at ``path`` if it was written with ``settings`` (None: any); None (with a notice when a file is
    there but cannot be resumed) otherwise."""
    if path is None or not path.is_file():
        return None
    try:
        checkpoint = FitCheckpoint(**torch.load(path, map_location="cpu", weights_only=True))
    except Exception as error:  # a file of another version or a damaged one: start over rather than fail
        notify(f"{path} cannot be read ({type(error).__name__}); this fit starts from the first iteration")
        return None
    if settings is not None and checkpoint.settings != settings:
        notify(f"{path} was written by a fit with other settings; this fit starts from the first iteration")
        return None
    return checkpoint


def checkpoint_iteration(path: Path, settings: Optional[str] = None) -> int:
    """The iteration of the checkpoint at ``path`` (written with ``settings``, when given): where a fit resumes, 0
    without one."""
    checkpoint = load_checkpoint(path, settings, notify=lambda message: None)
    return checkpoint.iteration if checkpoint is not None else 0


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
    adam = {}
    for name, parameter in model.named_parameters():
        state = optimizer.state.get(parameter)
        if state:
            adam[name] = {key: value.detach().cpu().clone() for key, value in state.items()}
    return FitCheckpoint(
        iteration=iteration,
        seconds=seconds,
        settings=settings,
        model={key: value.detach().cpu().clone() for key, value in model.state_dict().items()},
        adam=adam,
        generator=generator.get_state(),
        mse=mse[:iteration].detach().cpu().clone(),
        records=records[:iteration].detach().cpu().clone() if records is not None else None,
        filter_lrs=list(filter_lrs[:iteration]),
        resumed=list(resumed),
    )


@torch.no_grad()
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
    model.load_state_dict(checkpoint.model)
    on_device = {
        id(p): bool(g.get("capturable") or g.get("fused")) for g in optimizer.param_groups for p in g["params"]
    }
    for name, parameter in model.named_parameters():
        if name not in checkpoint.adam:
            continue
        state = {key: value.to(parameter.device) for key, value in checkpoint.adam[name].items()}
        if "step" in state and not on_device[id(parameter)]:  # Adam keeps its step count on the CPU unless capturable
            state["step"] = state["step"].cpu()
        optimizer.state[parameter] = state
    generator.set_state(checkpoint.generator)
    done = checkpoint.iteration
    mse, records = (mse, records) if index is None else (mse[:, index], None if records is None else records[:, index])
    mse[:done] = checkpoint.mse
    if records is not None and checkpoint.records is not None:
        records[:done] = checkpoint.records
    filter_lrs[:done] = checkpoint.filter_lrs
    guard.resume(done, mse[0].clone())


def set_schedule(scheduler: LambdaLR, iteration: int) -> None:
    """Move ``scheduler`` (and its optimizer's rates) to where it stands after ``iteration`` iterations."""
    scheduler.last_epoch = iteration
    for group, base, factor in zip(scheduler.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
        rate = base * factor(iteration)
        if isinstance(group["lr"], Tensor):
            group["lr"].fill_(rate)
        else:
            group["lr"] = rate
