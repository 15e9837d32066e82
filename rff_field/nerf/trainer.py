"""nerfstudio's trainer for this package's methods, by subclass hooks: options and data checked before a run folder
is written, the device chosen where left open, training stopped with one line when it diverges or collapses."""

from __future__ import annotations

import signal
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Type

import torch
from nerfstudio.configs.base_config import MachineConfig
from nerfstudio.engine.trainer import Trainer, TrainerConfig
from nerfstudio.utils.misc import step_check
from nerfstudio.utils.rich_utils import CONSOLE

from rff_field.core.errors import (
    DIVERGED_EXIT_STATUS,
    INTERRUPTED_EXIT_STATUS,
    TrainingDiverged,
    UsageError,
    check_fields,
)
from rff_field.core.filter import FILTER_GROUP
from rff_field.nerf.checks import check_model_memory
from rff_field.nerf.filtered_model import FIELDS_GROUP
from rff_field.nerf.pipeline import check_pipeline, choose_by_data, usage_errors_exit

COLLAPSE_STEPS = 100
"""Consecutive steps in which no training ray meets any density that count as a collapsed field."""
EMPTY_ACCUMULATION = 1e-4
"""A ray whose accumulated opacity stays below this met no density."""


@dataclass
class RFFMachineConfig(MachineConfig):
    """nerfstudio's machine options, with a device left to the machine."""

    device_type: Literal["cpu", "cuda", "mps", "auto"] = "cuda"
    """Device to train on; 'auto' (the -lite methods' default): CUDA when there is one, else the CPU."""


@dataclass
class RFFTrainerConfig(TrainerConfig):
    """nerfstudio's trainer config, checked before ``ns-train`` saves it: a mistake leaves no run folder behind."""

    _target: Type = field(default_factory=lambda: RFFTrainer)
    machine: RFFMachineConfig = field(default_factory=RFFMachineConfig)
    """Machine configuration"""

    def prepare(self) -> list[str]:
        """Choose the device and the options left to the data, check options and data; returns notices of choices."""
        notices = []
        if self.data is not None:  # ns-train's --data, as its main sets it just before
            self.pipeline.datamanager.data = self.data
        if self.machine.device_type == "auto":
            self.machine.device_type = "cuda" if torch.cuda.is_available() else "cpu"
            if self.machine.device_type == "cpu":
                notices.append(f"no CUDA device: {self.method_name} trains on the CPU")
        elif self.machine.device_type == "cuda" and not torch.cuda.is_available():
            raise UsageError("--machine.device-type cuda: CUDA is not available here; pass --machine.device-type cpu")
        elif self.machine.device_type == "mps" and not torch.backends.mps.is_available():
            raise UsageError("--machine.device-type mps: MPS is not available here; pass --machine.device-type cpu")
        chosen = choose_by_data(self.pipeline)
        if chosen:
            notices.append(f"{self.method_name} on a Blender scene (an object in a void): {chosen}")
        check_pipeline(self.pipeline, "val", self.method_name)
        check_model_memory(self.pipeline, self.machine.device_type)
        check_fields(self, positive_int=("max_num_iterations",))
        if not 0 <= self.machine.seed < 2**32:  # numpy's seeds (nerfstudio seeds numpy)
            raise UsageError(f"--machine.seed must lie in [0, 2**32), got {self.machine.seed}")
        for name, group in self.optimizers.items():
            prefix = f"--optimizers.{name.replace('_', '-')}.optimizer."
            check_fields(group["optimizer"], positive=("lr",), prefix=prefix)
        resuming = self.load_dir is not None or self.load_checkpoint is not None
        if not resuming and any(self.get_checkpoint_dir().glob("step-*.ckpt")):
            raise UsageError(
                f"{self.get_base_dir()} holds an earlier run's checkpoints; pass --load-dir {self.get_checkpoint_dir()}"
                " to continue it, or another --timestamp or --experiment-name"
            )
        return notices

    def print_to_terminal(self) -> None:
        # ns-train calls this just before it saves config.yml, which then holds the choices made here
        with usage_errors_exit():
            notices = self.prepare()
        for notice in notices:
            CONSOLE.print(f"[yellow]Notice: {notice}[/yellow]", soft_wrap=True, highlight=False)
        super().print_to_terminal()


class RFFTrainer(Trainer):
    """nerfstudio's ``Trainer`` that stops a diverged or collapsed run and ends training after the step on Ctrl-C. Its
    checks read the device only when nerfstudio logs, and before every checkpoint (none of a non-finite state)."""

    config: RFFTrainerConfig
    interrupted = False  # whether Ctrl-C ended training early (its checkpoint is saved)
    _first_bad = _empty_steps = None  # on the device: the first step with a non-finite loss, the empty steps in a row

    def train(self) -> None:
        """Train; a divergence or collapse exits with one line and status 3, Ctrl-C with 130 (after the step's
        checkpoint; a second Ctrl-C at once), Ctrl-C in the viewer after training with 0 (as nerfstudio)."""
        prog = Path(sys.argv[0]).name
        try:
            self.train_checked()
        except TrainingDiverged as err:
            print(f"{prog}: {err}", file=sys.stderr)
            sys.exit(DIVERGED_EXIT_STATUS)
        except KeyboardInterrupt:
            if self.training_state == "completed":
                return
            self.shutdown()
            print(f"{prog}: stopped at once during step {self.step} (checkpoints saved before it are kept)",
                  file=sys.stderr)  # fmt: skip
            sys.exit(INTERRUPTED_EXIT_STATUS)
        if self.interrupted:
            self.shutdown()
            print(f"{prog}: interrupted after step {self.step}; its checkpoint is in {self.checkpoint_dir} (--load-dir "
                  "goes on from it)", file=sys.stderr)  # fmt: skip
            sys.exit(INTERRUPTED_EXIT_STATUS)

    def train_checked(self) -> None:
        """Train; the first Ctrl-C ends training after its step with a checkpoint, a second stops at once."""
        previous = signal.getsignal(signal.SIGINT)
        watch = threading.current_thread() is threading.main_thread() and previous is not signal.SIG_IGN

        def stop_after_step(signum, frame) -> None:
            signal.signal(signal.SIGINT, previous)
            if self.stop_training or self.training_state == "completed":
                raise KeyboardInterrupt
            self.stop_training = self.interrupted = True
            self.config.viewer.quit_on_train_completion = True  # the viewer does not wait for another Ctrl-C
            print(f"Ctrl-C: training stops after this step and saves a checkpoint in {self.checkpoint_dir}; press "
                  "Ctrl-C again to stop at once", file=sys.stderr, flush=True)  # fmt: skip

        if watch:
            signal.signal(signal.SIGINT, stop_after_step)
        try:
            super().train()
        finally:
            if watch:
                signal.signal(signal.SIGINT, previous)

    def train_iteration(self, step: int):
        loss, loss_dict, metrics_dict = super().train_iteration(step)
        with torch.no_grad():
            loss = loss.detach()
            if self._first_bad is None:
                self._first_bad = torch.full((), -1, dtype=torch.long, device=loss.device)
                self._empty_steps = torch.zeros((), dtype=torch.long, device=loss.device)
            self._first_bad = torch.where((self._first_bad < 0) & ~torch.isfinite(loss), step, self._first_bad)
            opacity = getattr(self.pipeline.model, "max_training_accumulation", None)
            if opacity is not None:
                empty = opacity.to(loss.device) < EMPTY_ACCUMULATION
                self._empty_steps = torch.where(empty, self._empty_steps + 1, 0)
        if step_check(step, max(self.config.logging.steps_per_log, 1)):
            self.check_health(step)
        return loss, loss_dict, metrics_dict

    def save_checkpoint(self, step: int) -> None:
        self.check_health(step, parameters=True)
        super().save_checkpoint(step)

    def check_health(self, step: int, parameters: bool = False) -> None:
        """Raise :class:`TrainingDiverged` (stopping the trainer) for a non-finite loss (or parameter, with
        ``parameters``) or a field that met no ray for :data:`COLLAPSE_STEPS` steps."""
        if self._first_bad is None:
            return
        first_bad, empty_steps = (int(value) for value in torch.stack([self._first_bad, self._empty_steps]).tolist())
        params = list(self.pipeline.model.parameters()) if parameters and first_bad < 0 else []
        if first_bad >= 0 or (params and not bool(torch.stack([torch.isfinite(p).all() for p in params]).all())):
            what = f"the loss became non-finite at step {first_bad}" if first_bad >= 0 else "a parameter is non-finite"
            saved = sorted(self.checkpoint_dir.glob("step-*.ckpt"))
            kept = f"the last checkpoint, {saved[-1].name}, holds finite values" if saved else "none was saved"
            self.stop(f"training diverged: {what}; try {self.rate_hints(list(self.config.optimizers))}; {kept}")
        if empty_steps >= COLLAPSE_STEPS:
            hints = self.rate_hints([FIELDS_GROUP])
            self.stop(f"training collapsed: the density is zero along every training ray for the last {empty_steps} "
                      f"steps (step {step}), the loss sits at the background; try {hints}")  # fmt: skip

    def rate_hints(self, groups: list[str]) -> str:
        """Lower rates of the optimizer ``groups`` to try, with their values (the line search's bound for a filter)."""
        search = self.pipeline.model.config.line_search
        hints = []
        for name in groups:
            if name == FILTER_GROUP and search.enabled:
                hints.append(f"a lower --pipeline.model.line-search.lr-max (now {search.lr_max:g})")
            else:
                lr = self.config.optimizers[name]["optimizer"].lr
                hints.append(f"a lower --optimizers.{name.replace('_', '-')}.optimizer.lr (now {lr:g})")
        return ", ".join(hints)

    def stop(self, message: str) -> None:
        self.shutdown()
        raise TrainingDiverged(message)
