"""When a fit stops before its last step, and what it saves: at its time budget, on Ctrl-C, and a checkpoint every
few minutes in between.

Ctrl-C lets the loop finish its step, save its checkpoint and stop, so the same command resumes it; a second Ctrl-C
interrupts at once, as usual.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Optional, Sequence

from rff_field.common.checkpoint import CHECKPOINT_EVERY_S


class FitInterrupted(KeyboardInterrupt):
    """A fit stopped by Ctrl-C at the end of a step; its message says where, and how to resume it.

    Args:
        step: The steps (or iterations: ``unit``) done.
        total: The fit's steps.
        saved: The checkpoints it wrote.
        unit: What the message calls a step.
    """

    def __init__(self, step: int, total: int, saved: Sequence[object], unit: str = "step") -> None:
        super().__init__(step, total, saved, unit)
        self.step, self.total, self.saved, self.unit = step, total, list(saved), unit
        self.resume_with = "the same command"
        """What goes on from the checkpoints (a command that needs another option to resume says so)."""

    def __str__(self) -> str:
        where = f"interrupted after {self.unit} {self.step} of {self.total}"
        if not self.saved:
            return where
        files = ", ".join(str(path) for path in self.saved)
        checkpoints = f"its checkpoint is in {files}" if len(self.saved) == 1 else f"the checkpoints are in {files}"
        return f"{where}; {checkpoints}, and {self.resume_with} goes on from there"


class FitStops:
    """Decides, at each check of a fit's loop, whether it stops there, and saves its checkpoints when it should.

    Args:
        total: The fit's steps.
        stop_at: A ``time.monotonic()`` value past which the fit stops (None: no budget).
        save: Saves the checkpoints after a given number of steps and returns the files written (None: no
            checkpoints).
        unit: What the message calls a step.
    """

    def __init__(
        self, total: int, stop_at: Optional[float], save: Optional[Callable[[int], list[Path]]], unit: str
    ) -> None:
        self.total, self.stop_at, self.save, self.unit = total, stop_at, save, unit
        self.requested = False
        """Whether Ctrl-C was pressed (the loop then checks at the end of the step)."""
        self.saved_at = time.monotonic()

    def stop(self, done: int) -> bool:
        """After a check at ``done`` steps: True when the time budget stops the fit here (its checkpoint saved).

        Raises:
            FitInterrupted: When Ctrl-C was pressed (after saving the checkpoint).
        """
        if done >= self.total:
            return False
        if self.requested:
            written = self.save(done) if self.save is not None else []
            raise FitInterrupted(done, self.total, written, self.unit)
        if self.stop_at is not None and time.monotonic() > self.stop_at:
            if self.save is not None:
                self.save(done)
            return True
        if self.save is not None and time.monotonic() - self.saved_at > CHECKPOINT_EVERY_S:
            self.save(done)
            self.saved_at = time.monotonic()
        return False


@contextlib.contextmanager
def fit_stops(
    total: int, stop_at: Optional[float], save: Optional[Callable[[int], list[Path]]], unit: str = "step"
) -> Iterator[FitStops]:
    """A :class:`FitStops` for the loop within, where the first SIGINT sets ``requested`` instead of raising
    :class:`KeyboardInterrupt` (outside the main thread, where handlers cannot be set, SIGINT keeps its usual
    effect)."""
    stops = FitStops(total, stop_at, save, unit)
    if threading.current_thread() is not threading.main_thread():
        yield stops
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame) -> None:
        stops.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C interrupts at once

    signal.signal(signal.SIGINT, handler)
    try:
        yield stops
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)
