"""Ctrl-C during a fit: the loop finishes its step, saves its checkpoint and stops, so the same command resumes it.

A second Ctrl-C interrupts at once, as usual.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Iterator, Sequence


class FitInterrupted(KeyboardInterrupt):
    """A fit stopped by Ctrl-C at the end of a step; the message says where, and how to resume it."""


class InterruptRequest:
    """Whether Ctrl-C was pressed since the fit started (read at the end of every step)."""

    def __init__(self) -> None:
        self.requested = False


@contextlib.contextmanager
def interrupt_at_step_end() -> Iterator[InterruptRequest]:
    """Within: the first SIGINT sets ``requested`` instead of raising :class:`KeyboardInterrupt` (outside the main
    thread, where handlers cannot be set, SIGINT keeps its usual effect)."""
    request = InterruptRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = signal.getsignal(signal.SIGINT)

    def handler(signum, frame) -> None:
        request.requested = True
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second Ctrl-C interrupts at once

    signal.signal(signal.SIGINT, handler)
    try:
        yield request
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.default_int_handler)


def interrupted_message(step: int, total: int, saved: Sequence[object], unit: str = "step") -> str:
    """What a fit stopped by Ctrl-C after ``step`` of ``total`` steps (or iterations: ``unit``) says; ``saved``:
    the checkpoints it wrote."""
    where = f"interrupted after {unit} {step} of {total}"
    if not saved:
        return where
    files = ", ".join(str(path) for path in saved)
    checkpoints = f"its checkpoint is in {files}" if len(saved) == 1 else f"the checkpoints are in {files}"
    return f"{where}; {checkpoints}, and the same command goes on from there"
