"""Progress bars for long work: rich's bar on a terminal, and a line now and then in a log file; one-line notices."""

from __future__ import annotations

import os
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

LOG_WIDTH = 160
"""Columns of a progress line written where the output is not a terminal."""


class LoggedProgress(Progress):
    """rich's ``Progress``, which also shows progress where its output is not a terminal (a log file, a pipe).

    There rich draws the bar only once, when it stops; this prints the bar's line at most every
    ``log_interval_s`` seconds while the work goes on.
    """

    def __init__(self, *columns: Any, log_interval_s: float = 60.0, **kwargs: Any) -> None:
        if kwargs.get("console") is None and not Console().is_terminal and "COLUMNS" not in os.environ:
            kwargs["console"] = Console(width=LOG_WIDTH)  # rich's 80 columns would cut the counts and times off
        super().__init__(*columns, **kwargs)
        self.log_interval_s = log_interval_s
        self._logged_at = time.monotonic()

    def update(self, task_id: TaskID, **kwargs: Any) -> None:
        super().update(task_id, **kwargs)
        self._log()

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._log()

    def _log(self) -> None:
        if self.console.is_terminal or not self.live.is_started or self.finished:  # rich prints the last state
            return
        now = time.monotonic()
        if now - self._logged_at >= self.log_interval_s:
            self._logged_at = now
            self.console.print(self.get_renderable())


def print_note(message: str) -> None:
    """Print a one-line notice, ``note: <message>`` (where the fits and benchmarks send them by default)."""
    print(f"note: {message}")


PACKAGE_FOLDER = Path(__file__).resolve().parents[1]


def warnings_as_notes(show: Callable[..., None]) -> Callable[..., None]:
    """A ``warnings.showwarning`` that prints the warnings this package raises as :func:`print_note` lines, and
    passes the others to ``show``."""

    def show_warning(message, category, filename, lineno, file=None, line=None) -> None:
        if Path(filename).resolve().is_relative_to(PACKAGE_FOLDER):
            print_note(str(message))
        else:
            show(message, category, filename, lineno, file, line)

    return show_warning


@contextmanager
def own_warnings_as_notes() -> Iterator[None]:
    """Within the block (a command's run), this package's warnings print as one-line notices rather than Python's
    two lines with a source line; the Python API keeps them as warnings."""
    previous = warnings.showwarning
    warnings.showwarning = warnings_as_notes(previous)
    try:
        yield
    finally:
        warnings.showwarning = previous


def counted_progress() -> LoggedProgress:
    """A bar with its task's description, count done of total, time spent and time left."""
    return LoggedProgress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          TimeRemainingColumn())  # fmt: skip


@contextmanager
def training_progress(total: int, description: str) -> Iterator[Callable[[int, float, Optional[float]], None]]:
    """Yields ``on_step(step, loss, filter_lr)``, which advances the bar and shows the values."""
    columns = (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}"),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    with LoggedProgress(*columns, transient=False) as progress:
        task = progress.add_task(description, total=total, loss="-", rate="")

        def on_step(step: int, loss: float, filter_lr: Optional[float]) -> None:
            rate = f"filter lr {filter_lr:.2e}" if filter_lr is not None else ""
            progress.update(task, completed=step + 1, loss=f"{loss:.4g}", rate=rate)

        yield on_step


def psnr_progress(
    enabled: bool, total: int, description: str, label: str = "PSNR"
) -> tuple[Optional[LoggedProgress], Any]:
    """A bar over a fit's iterations that shows its PSNR (the task's ``psnr`` field, shown as ``label``); the bar
    and its task, or (None, None) when not ``enabled``."""
    if not enabled:
        return None, None
    bar = LoggedProgress(TextColumn(description), BarColumn(), MofNCompleteColumn(),
                         TextColumn(f"{label} {{task.fields[psnr]:6.2f}} dB"), TimeRemainingColumn())  # fmt: skip
    return bar, bar.add_task("fit", total=total, psnr=float("nan"))
