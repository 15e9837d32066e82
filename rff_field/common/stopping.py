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
    """A fit (or a benchmark's jobs) stopped by Ctrl-C at the end of a step; its message says where, and how to
    resume.

    Args:
        where: Where it stopped, e.g. ``interrupted after step 7 of 10``.
        saved: The checkpoints it wrote.
    """

    def __init__(self, where: str, saved: Sequence[object] = ()) -> None:
        super().__init__(where, saved)
        self.where, self.saved = where, list(saved)
        self.resume_with = "the same command"
        """What goes on from the checkpoints (a command that needs another option to resume says so)."""

    def __str__(self) -> str:
        if not self.saved:
            return self.where
        files = ", ".join(str(path) for path in self.saved)
        checkpoints = f"its checkpoint is in {files}" if len(self.saved) == 1 else f"the checkpoints are in {files}"
        return f"{self.where}; {checkpoints}, and {self.resume_with} goes on from there"


_stop_requested_by_parent: Optional[Callable[[], bool]] = None


def follow_parent_stop(requested: Callable[[], bool]) -> None:
    """In a worker process: fits also stop, as on Ctrl-C, once ``requested()`` is true (the parent was interrupted,
    e.g. by a ``kill -INT`` that only it received)."""
    global _stop_requested_by_parent
    _stop_requested_by_parent = requested


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
        self.pressed = False
        """Whether Ctrl-C was pressed."""
        self.saved_at = time.monotonic()

    @property
    def requested(self) -> bool:
        """Whether the fit should stop as on Ctrl-C (the loop then checks at the end of the step)."""
        return self.pressed or (_stop_requested_by_parent is not None and _stop_requested_by_parent())

    def stop(self, done: int) -> bool:
        """After a check at ``done`` steps: True when the time budget stops the fit here (its checkpoint saved).

        Raises:
            FitInterrupted: When Ctrl-C was pressed (after saving the checkpoint).
        """
        if done >= self.total:
            return False
        if self.requested:
            written = self.save(done) if self.save is not None else []
            raise FitInterrupted(f"interrupted after {self.unit} {done} of {self.total}", written)
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
    """A :class:`FitStops` for the loop within, where the first SIGINT or SIGTERM (a batch scheduler's stop) sets
    ``pressed`` instead of ending the process; a second one stops at once (outside the main thread, where handlers
    cannot be set, both keep their usual effect; a signal the process was started ignoring, as a shell's background
    jobs ignore SIGINT, stays ignored)."""
    stops = FitStops(total, stop_at, save, unit)
    if threading.current_thread() is not threading.main_thread():
        yield stops
        return
    previous = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    previous = {signum: earlier for signum, earlier in previous.items() if earlier != signal.SIG_IGN}
    at_once = {signal.SIGINT: signal.default_int_handler, signal.SIGTERM: signal.SIG_DFL}

    def handler(signum, frame) -> None:
        stops.pressed = True
        signal.signal(signum, at_once[signum])

    for signum in previous:
        signal.signal(signum, handler)
    try:
        yield stops
    finally:
        for signum, earlier in previous.items():
            signal.signal(signum, earlier if earlier is not None else at_once[signum])


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM (``kill``, a batch scheduler's stop) raises :class:`KeyboardInterrupt` as Ctrl-C
    does, so that the work's own clean-up runs (in the main thread only; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
