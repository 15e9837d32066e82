"""The one fit loop that image and SDF fits share (SIREN's ``training.py`` is the model).

An application builds its network and a :class:`FitTask` (the loss of a step, drawing its own batch) and calls
:func:`train`. The loop owns the rest: Adam on two named groups (the INR's, decaying log-linearly, and the filter's,
set every step by the line search or kept at a constant rate), the divergence guard, the time budget, Ctrl-C and
SIGTERM, checkpoints (a resumed fit takes the same steps, to the bit, as one never stopped), progress and the
per-step history.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Literal, Optional

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from torch import Tensor, nn

from rff_field.common.machine import check_memory, resolve_device
from rff_field.core.divergence import LastFiniteState, divergence_hints
from rff_field.core.errors import TrainingDiverged, UsageError, check_fields
from rff_field.core.filter import FILTER_GROUP, named_param_groups, split_filter_parameters
from rff_field.core.line_search import LineSearchConfig, attach_line_search
from rff_field.fit.checkpoint import load_checkpoint, save_checkpoint

logger = logging.getLogger(__name__)

HISTORY_BYTES_PER_STEP = 256
"""Memory the record of a step takes (its loss and line search on the device, then as lists and in metrics.json)."""
CHECKPOINT_EVERY_S = 300.0
"""Seconds between checkpoints of a running fit (besides those written when it stops)."""


@dataclass
class TrainConfig:
    """The optimisation every fit shares: Adam, the INR's rate decaying log-linearly, the filter's set by the line
    search (or constant)."""

    iters: int = 2000
    """Iterations (for an image, passes over its pixels; for an SDF, steps)."""
    lr: Optional[float] = None
    """Initial learning rate of the INR (everything but the filter); default: the method's."""
    lr_final: Optional[float] = None
    """The INR's rate at the last iteration, reached log-linearly from --lr; default: --lr / 10."""
    line_search: LineSearchConfig = field(default_factory=LineSearchConfig)
    """The filter's learning rate, set every step by the paper's line search."""
    filter_lr: Optional[float] = None
    """Without the line search: the filter's rate (default: --lr)."""
    filter_schedule: bool = False
    """Without the line search: decay the filter's rate with the INR's instead of keeping it constant."""
    grad_clip: float = 0.0
    """Clip the gradients' norm to this; 0: no clipping."""
    amsgrad: bool = False
    """Adam with AMSGrad."""
    seed: int = 0
    """Seed of the initialisation and of the batches."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Where to train: ``auto`` picks CUDA when available."""
    log_every: int = 50
    """Iterations between progress updates and divergence checks (each reads the losses on the host)."""
    time_budget: Optional[float] = None
    """Seconds of training (of this run) after which the fit stops at its next check, saves a checkpoint and writes
    its outputs marked stopped (the same command goes on)."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options that cannot work."""
        check_fields(
            self,
            positive_int=("iters", "log_every"),
            non_negative_int=("seed",),
            positive=("lr", "lr_final", "filter_lr", "time_budget"),
            non_negative=("grad_clip",),
        )
        if self.lr is not None and self.lr_final is not None and self.lr_final > self.lr:
            raise UsageError(f"--lr-final ({self.lr_final:g}) must not exceed --lr ({self.lr:g})")
        self.line_search.check()

    def torch_device(self) -> torch.device:
        """The device to train on."""
        return resolve_device(self.device)


class FitTask:
    """What an application fits: the loss of a step, drawing its own batch. Override :meth:`loss`; a task that
    draws random batches keeps its generator's state in :meth:`state_dict`."""

    def loss(self, model: nn.Module, step: int) -> Tensor:
        """The scalar training loss of step ``step`` (0-based), with its autograd graph."""
        raise NotImplementedError

    def state_dict(self) -> dict:
        """What a resumed fit needs to draw the same batches (e.g. a generator's state)."""
        return {}

    def load_state_dict(self, state: dict) -> None:
        """Put back what :meth:`state_dict` returned."""

    def describe(self, loss: float) -> str:
        """The progress bar's text for the loss of the last step."""
        return f"loss {loss:.4g}"


@dataclass
class FitHistory:
    """What :func:`train` did. A diverged fit's model is back at its last finite state, of step ``steps``."""

    steps: int
    """Steps kept (all of them, or up to the last finite state, or to where the time budget stopped the fit)."""
    loss: list[float]
    """The loss of every step."""
    filter_lr: Optional[list[float]]
    """The filter's rate at every step (None without a filter)."""
    line_search: Optional[dict[str, list[float]]]
    """The line search's record of every step: ``loss``, ``d_filter``, ``lr_d_inr`` (None when it did not run)."""
    seconds: float
    """Training time over every run of this fit."""
    diverged: Optional[str] = None
    """Why training stopped by diverging, and what to try."""
    stopped: Optional[str] = None
    """Where the time budget stopped it (its checkpoint goes on)."""
    resumed_at: list[int] = field(default_factory=list)
    """Steps at which runs resumed the fit from its checkpoint."""

    def metrics(self) -> dict:
        """The history as ``metrics.json`` entries (every step's values included)."""
        out = {
            "steps": self.steps,
            "seconds": self.seconds,
            "seconds_per_step": self.seconds / max(self.steps, 1),
            "loss_history": self.loss,
            "filter_lr_history": self.filter_lr,
            "line_search_history": self.line_search,
        }
        out.update({key: getattr(self, key) for key in ("diverged", "stopped", "resumed_at") if getattr(self, key)})
        return out


class FitInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped a fit at the end of a step; the message says where and how to go on."""


@contextlib.contextmanager
def stop_requests() -> Iterator[dict]:
    """Within the block, the first SIGINT or SIGTERM sets ``requested`` in the yielded dict instead of ending the
    process; a second one acts at once. Only in the main thread; a signal the process ignores stays ignored."""
    flags = {"requested": False}
    if threading.current_thread() is not threading.main_thread():
        yield flags
        return
    at_once = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}
    previous = {signum: signal.getsignal(signum) for signum in at_once}

    def handler(signum: int, frame: object) -> None:
        flags["requested"] = True
        signal.signal(signum, at_once[signum])

    for signum, earlier in previous.items():
        if earlier != signal.SIG_IGN:
            signal.signal(signum, handler)
    try:
        yield flags
    finally:
        for signum, earlier in previous.items():
            signal.signal(signum, earlier if earlier is not None else at_once[signum])


def progress_bar(enabled: bool) -> Progress:
    """rich's bar on stderr: description, count, the task's text, time spent and left."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[text]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=not enabled,
    )


def train(
    model: nn.Module,
    task: FitTask,
    config: TrainConfig,
    lr: float,
    checkpoint: Optional[Path] = None,
    settings: str = "",
    description: str = "fit",
    progress: bool = True,
    steps_per_iter: int = 1,
) -> FitHistory:
    """Train ``model`` (already on its device) on ``task``.

    Args:
        model: The network; its filters (found by type) form the optimizer group ``filter``.
        task: The loss of each step.
        config: The optimisation; ``config.lr`` is ignored for ``lr``.
        lr: The INR's initial rate (``config.lr`` or the method's default, as the application resolves it).
        checkpoint: A file to resume from and to save to: every few minutes, on Ctrl-C/SIGTERM, at the time budget
            and at the end of training (so that an interrupted measurement does not train again).
        settings: What the checkpoint must have been written with (:func:`~rff_field.fit.checkpoint.settings_key`).
        description: The progress bar's label.
        progress: Show the progress bar.
        steps_per_iter: Optimizer steps per iteration (an image's mini-batches); the schedule, the checks and the
            checkpoints go by iterations.

    Raises:
        FitInterrupted: At the end of the step during which Ctrl-C or SIGTERM came, after saving the checkpoint.
        UsageError: If ``checkpoint`` holds a fit with other settings.
    """
    config.check()
    device = next(model.parameters()).device
    check_memory("--iters", config.iters, lambda iters: HISTORY_BYTES_PER_STEP * iters * steps_per_iter, device)
    steps, check_every = config.iters * steps_per_iter, config.log_every * steps_per_iter
    filter_lr = config.filter_lr if config.filter_lr is not None else lr
    final = config.lr_final if config.lr_final is not None else lr / 10
    if final > lr:
        raise UsageError(f"--lr-final ({final:g}) must not exceed the initial rate ({lr:g}); lower --lr-final")
    optimizer = torch.optim.Adam(named_param_groups(model, lr, filter_lr), amsgrad=config.amsgrad)

    def decay(step: int) -> float:
        return (final / lr) ** (min(step // steps_per_iter, config.iters) / config.iters)

    filter_follows = config.filter_schedule and not config.line_search.enabled
    factors = [
        decay if group["name"] != FILTER_GROUP or filter_follows else (lambda step: 1.0)
        for group in optimizer.param_groups
    ]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factors)
    filter_params, inr_params = split_filter_parameters(model)
    hints = divergence_hints(lr, filter_lr if filter_params else None, config.line_search, config.lr_final)
    guard = LastFiniteState(model, {"filter": filter_params, "INR": inr_params}, hints)

    losses = torch.zeros(steps, dtype=torch.float64, device=device)
    records = torch.zeros(steps, 4, dtype=torch.float64, device=device)
    rates: list[float] = []  # without the line search: the scheduled rates, no tensor read
    first, seconds_before, resumed = 0, 0.0, []
    saved = load_checkpoint(checkpoint, settings)
    if saved is not None:
        first, seconds_before, resumed = saved["step"], saved["seconds"], [*saved["resumed"], saved["step"]]
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        task.load_state_dict(saved["task"])
        losses[:first], records[:first], rates = saved["loss"].to(device), saved["records"].to(device), saved["rates"]
        scheduler.last_epoch = first
        for group, base, factor in zip(optimizer.param_groups, scheduler.base_lrs, factors):
            group["lr"] = base * factor(first)
        guard.resume(first, losses[0].clone())
        logger.info(f"resuming at step {first} of {steps} from {checkpoint} (delete it to start over)")
    current: dict[str, Tensor] = {}
    search = attach_line_search(config.line_search, optimizer, loss_fn=lambda: current["loss"])
    has_filter = any(group["name"] == FILTER_GROUP for group in optimizer.param_groups)

    def save(done: int) -> None:
        if checkpoint is not None:
            save_checkpoint(
                checkpoint,
                {
                    "step": done,
                    "seconds": seconds_before + time.perf_counter() - start,
                    "settings": settings,
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "task": task.state_dict(),
                    "loss": losses[:done].cpu(),
                    "records": records[:done].cpu(),
                    "rates": rates[:done],
                    "resumed": resumed,
                },
            )

    diverged = stopped = None
    done = checked = first
    start = saved_at = time.perf_counter()
    try:
        with progress_bar(progress) as bar, stop_requests() as stop:
            bar_task = bar.add_task(description, total=steps, completed=first, text="")
            for step in range(first, steps):
                loss = task.loss(model, step)
                losses[step] = loss.detach()
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if config.grad_clip > 0 and search is not None:  # its slopes need the gradients before clipping
                    search.clip_grad_norm_(config.grad_clip)
                elif config.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                current["loss"] = loss.detach()
                optimizer.step()
                if search is not None:
                    records[step] = search.records[-1]
                elif has_filter:
                    rates.append(filter_lr * (decay(step) if filter_follows else 1.0))
                scheduler.step()
                done = step + 1
                at_iteration_end = done % steps_per_iter == 0
                if not (at_iteration_end and (done % check_every == 0 or done == steps or stop["requested"])):
                    continue
                try:
                    guard.check(done, losses[checked:done])
                except TrainingDiverged as err:  # the model is back at its last finite state, of step guard.step
                    diverged = str(err)
                    break
                checked = done
                bar.update(bar_task, completed=done, text=task.describe(float(losses[done - 1])))
                if stop["requested"] and done < steps:
                    save(done)
                    where = f"interrupted after step {done} of {steps}"
                    if checkpoint is None:
                        raise FitInterrupted(where)
                    raise FitInterrupted(f"{where}; its checkpoint is in {checkpoint}, and the same command goes on")
                elapsed = time.perf_counter() - start  # of this run: a rerun with the same budget goes on
                if config.time_budget is not None and elapsed > config.time_budget and done < steps:
                    stopped = f"time budget reached after step {done} of {steps}"
                    save(done)
                    break
                if time.perf_counter() - saved_at > CHECKPOINT_EVERY_S:
                    save(done)
                    saved_at = time.perf_counter()
            if diverged is None and stopped is None and first < steps:
                save(steps)  # measuring takes a while: stopped then, the same command skips the training
    finally:
        if search is not None:
            search.remove()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    kept = guard.step if diverged is not None else done
    loss_list = losses[:kept].tolist()
    search_rows = records[:kept].cpu().tolist() if search is not None else None
    if search_rows is not None:
        rates = [row[3] for row in search_rows]
        search_rows = {key: [row[i] for row in search_rows] for i, key in enumerate(("loss", "d_filter", "lr_d_inr"))}
    seconds = seconds_before + time.perf_counter() - start
    filter_lr = rates[:kept] if has_filter else None
    return FitHistory(kept, loss_list, filter_lr, search_rows, seconds, diverged, stopped, resumed)
