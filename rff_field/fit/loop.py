"""The fit loop of image and SDF fits: an application gives its network and a :class:`FitTask`; the loop owns Adam
on the INR's and the filter's groups, the divergence guard, the time budget, Ctrl-C, checkpoints (a resumed fit takes
the same steps, to the bit) and the history."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator, Literal, Optional

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from torch import Tensor, nn

from rff_field.common.machine import resolve_device
from rff_field.core.divergence import LastFiniteState, divergence_hints
from rff_field.core.errors import TrainingDiverged, UsageError, check_fields
from rff_field.core.filter import FILTER_GROUP, named_param_groups, split_filter_parameters
from rff_field.core.line_search import RECORD_FIELDS, LineSearchConfig, attach_line_search
from rff_field.fit.checkpoint import load_checkpoint, save_checkpoint

logger = logging.getLogger(__name__)

HISTORY_BYTES_PER_STEP = 256
"""Memory a step's record takes (on the device, then as lists and in metrics.json)."""
CHECKPOINT_EVERY_S = 300.0
"""Seconds between checkpoints of a running fit (besides those written when it stops)."""


@dataclass
class TrainConfig:
    """The optimisation every fit shares: Adam, the INR's rate decaying log-linearly, the filter's set by the line
    search (or constant)."""

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
    """Passes (of an image fit) or steps (of an SDF fit) between progress updates and divergence checks (each reads
    the losses on the host)."""
    time_budget: Optional[float] = None
    """Seconds of training (of this run) after which the fit stops at its next check, saves a checkpoint and writes
    its outputs marked stopped (the same command goes on)."""

    def check(self) -> None:
        """Raise :class:`UsageError` for options that cannot work."""
        check_fields(
            self,
            positive_int=("log_every",),
            non_negative_int=("seed",),
            positive=("lr", "lr_final", "filter_lr", "time_budget"),
            non_negative=("grad_clip",),
        )
        if self.lr is not None and self.lr_final is not None and self.lr_final > self.lr:
            raise UsageError(f"--lr-final ({self.lr_final:g}) must not exceed --lr ({self.lr:g})")
        self.line_search.check()

    def with_rates(self, method_lr: float, batch_scale: float = 1.0) -> "TrainConfig":
        """A copy with every rate decided: ``lr`` (``--lr``, else the method's, times ``batch_scale``), ``lr_final``
        (default ``lr / 10``) and ``filter_lr`` (default: the unscaled ``lr``; the filter's rate and the line
        search's bounds do not follow the batch)."""
        lr = self.lr or method_lr
        config = replace(self, lr=lr * batch_scale, filter_lr=self.filter_lr or lr)
        config.lr_final = self.lr_final if self.lr_final is not None else config.lr / 10
        if config.lr_final > config.lr:
            raise UsageError(f"--lr-final ({config.lr_final:g}) must not exceed the initial rate ({config.lr:g}); "
                             "lower --lr-final")  # fmt: skip
        return config

    def torch_device(self) -> torch.device:
        """The device to train on."""
        return resolve_device(self.device)


class FitTask:
    """What an application fits: :meth:`loss` of a step (0-based, drawing its own batch); a task with random batches
    keeps its generator's state in :meth:`state_dict`."""

    def loss(self, model: nn.Module, step: int) -> Tensor:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass

    def describe(self, loss: float) -> str:
        return f"loss {loss:.4g}"


@dataclass
class FitHistory:
    """What :func:`train` did (a diverged fit's model is back at its last finite state, of step ``steps``)."""

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
    """In the block the first SIGINT or SIGTERM sets ``requested`` in the yielded dict, a second acts at once (main
    thread only; an ignored signal stays ignored)."""
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


class FitRun:
    """One run of the loop on a model: its optimizer on two named groups, their schedules, the divergence guard, the
    per-step record and the checkpoint it resumes from and saves to."""

    def __init__(self, model: nn.Module, task: FitTask, config: TrainConfig, checkpoint: Optional[Path],
                 settings: str, iterations: int, steps_per_iter: int) -> None:  # fmt: skip
        assert config.lr is not None and config.lr_final is not None and config.filter_lr is not None, "with_rates()"
        self.model, self.task, self.config, self.checkpoint, self.settings = model, task, config, checkpoint, settings
        self.iterations, self.steps_per_iter, self.steps = iterations, steps_per_iter, iterations * steps_per_iter
        device = next(model.parameters()).device
        self.optimizer = torch.optim.Adam(
            named_param_groups(model, config.lr, config.filter_lr), amsgrad=config.amsgrad
        )
        self.filter_follows = config.filter_schedule and not config.line_search.enabled
        self.factors = [self.decay if group["name"] != FILTER_GROUP or self.filter_follows else (lambda step: 1.0)
                        for group in self.optimizer.param_groups]  # fmt: skip
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.factors)
        filter_params, inr_params = split_filter_parameters(model)
        self.has_filter = bool(filter_params)
        hints = divergence_hints(config.lr, config.filter_lr if filter_params else None, config.line_search,
                                 config.lr_final)  # fmt: skip
        self.guard = LastFiniteState(model, {"filter": filter_params, "INR": inr_params}, hints)
        self.losses = torch.zeros(self.steps, dtype=torch.float64, device=device)
        self.records = torch.zeros(self.steps, 4, dtype=torch.float64, device=device)
        self.rates: list[float] = []  # without the line search: the scheduled rates, no tensor read
        self.first, self.seconds_before, self.resumed = 0, 0.0, []
        self.loss: Optional[Tensor] = None
        self.search = None
        self.started = time.perf_counter()

    def decay(self, step: int) -> float:
        """The INR's schedule: log-linear from ``lr`` to ``lr_final`` over the iterations."""
        config = self.config
        progress = min(step // self.steps_per_iter, self.iterations) / self.iterations
        return (config.lr_final / config.lr) ** progress

    def resume(self) -> None:
        """Go on from a checkpoint written with the same settings, if any."""
        saved = load_checkpoint(self.checkpoint, self.settings)
        if saved is not None:
            first = self.first = saved["step"]
            self.seconds_before, self.resumed = saved["seconds"], [*saved["resumed"], first]
            self.model.load_state_dict(saved["model"])
            self.optimizer.load_state_dict(saved["optimizer"])
            self.task.load_state_dict(saved["task"])
            self.losses[:first], self.records[:first] = saved["loss"], saved["records"]
            self.rates = saved["rates"]
            self.scheduler.last_epoch = first
            for group, base, factor in zip(self.optimizer.param_groups, self.scheduler.base_lrs, self.factors):
                group["lr"] = base * factor(first)
            self.guard.resume(first, self.losses[0].clone())
            logger.info(f"resuming at step {first} of {self.steps} from {self.checkpoint} (delete it to start over)")
        self.search = attach_line_search(self.config.line_search, self.optimizer, loss_fn=lambda: self.loss)

    def step(self, step: int) -> None:
        """One optimizer step: the task's loss, backward, clipping, the line search's rate, Adam, the schedule."""
        loss = self.task.loss(self.model, step)
        self.losses[step] = loss.detach()
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if self.config.grad_clip > 0 and self.search is not None:  # its slopes need the gradients before clipping
            self.search.clip_grad_norm_(self.config.grad_clip)
        elif self.config.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.grad_clip)
        self.loss = loss.detach()
        self.optimizer.step()
        if self.search is not None:
            self.records[step] = self.search.records[-1]
        elif self.has_filter:
            self.rates.append(self.config.filter_lr * (self.decay(step) if self.filter_follows else 1.0))
        self.scheduler.step()

    def seconds(self) -> float:
        return self.seconds_before + time.perf_counter() - self.started

    def save(self, done: int) -> None:
        """Write the checkpoint of ``done`` steps (when the fit has a checkpoint file)."""
        if self.checkpoint is None:
            return
        state = {"step": done, "seconds": self.seconds(), "settings": self.settings, "model": self.model.state_dict(),
                 "optimizer": self.optimizer.state_dict(), "task": self.task.state_dict(),
                 "loss": self.losses[:done].cpu(), "records": self.records[:done].cpu(), "rates": self.rates[:done],
                 "resumed": self.resumed}  # fmt: skip
        save_checkpoint(self.checkpoint, state)

    def detach(self) -> None:
        if self.search is not None:
            self.search.remove()

    def history(self, done: int, diverged: Optional[str], stopped: Optional[str]) -> FitHistory:
        """What the run did, up to ``done`` steps (to the guard's last finite state when it diverged)."""
        kept = self.guard.step if diverged is not None else done
        rates, search_rows = self.rates, None
        if self.search is not None:
            rows = self.records[:kept].cpu().tolist()
            rates = [row[3] for row in rows]
            search_rows = {key: [row[i] for row in rows] for i, key in enumerate(RECORD_FIELDS[:3])}
        filter_lr = rates[:kept] if self.has_filter else None
        return FitHistory(kept, self.losses[:kept].tolist(), filter_lr, search_rows, self.seconds(), diverged, stopped,
                          self.resumed)  # fmt: skip


def train(
    model: nn.Module,
    task: FitTask,
    config: TrainConfig,
    iterations: int,
    checkpoint: Optional[Path] = None,
    settings: str = "",
    description: str = "fit",
    progress: bool = True,
    steps_per_iter: int = 1,
) -> FitHistory:
    """Train ``model`` (on its device) on ``task`` for ``iterations`` (passes over an image of ``steps_per_iter``
    batches, or SDF steps) with ``config`` (rates decided by :meth:`TrainConfig.with_rates`). ``checkpoint``: resumed
    from when written with ``settings``, saved every few minutes, on Ctrl-C (then :class:`FitInterrupted`), at the
    time budget and at the end."""
    run = FitRun(model, task, config, checkpoint, settings, iterations, steps_per_iter)
    run.resume()
    steps, check_every = run.steps, config.log_every * steps_per_iter
    diverged = stopped = None
    done = checked = run.first
    saved_at = time.perf_counter()
    try:
        with progress_bar(progress) as bar, stop_requests() as stop:
            bar_task = bar.add_task(description, total=steps, completed=done, text="")
            for step in range(run.first, steps):
                run.step(step)
                done = step + 1
                if done % steps_per_iter or not (done % check_every == 0 or done == steps or stop["requested"]):
                    continue
                try:
                    run.guard.check(done, run.losses[checked:done])
                except TrainingDiverged as err:  # the model is back at its last finite state, of step guard.step
                    diverged = str(err)
                    break
                checked = done
                bar.update(bar_task, completed=done, text=task.describe(float(run.losses[done - 1])))
                if stop["requested"] and done < steps:
                    run.save(done)
                    where = f"interrupted after step {done} of {steps}"
                    if checkpoint is not None:
                        where += f"; its checkpoint is in {checkpoint}, and the same command goes on"
                    raise FitInterrupted(where)
                over_budget = config.time_budget is not None and time.perf_counter() - run.started > config.time_budget
                if over_budget and done < steps:
                    stopped = f"time budget reached after step {done} of {steps}"  # of this run: a rerun goes on
                    run.save(done)
                    break
                if time.perf_counter() - saved_at > CHECKPOINT_EVERY_S:
                    run.save(done)
                    saved_at = time.perf_counter()
            if diverged is None and stopped is None and run.first < steps:
                run.save(steps)  # measuring takes a while: stopped then, the same command skips the training
    finally:
        run.detach()
    if next(model.parameters()).device.type == "cuda":
        torch.cuda.synchronize()
    return run.history(done, diverged, stopped)
